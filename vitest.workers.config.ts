import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { packageAliases } from './test/support/package-aliases';

/**
 * The Worker tests: they run inside workerd (the Workers runtime) with the
 * Worker from wrangler.toml, and reach the run's real Postgres through the real
 * Neon drivers and the local Neon proxy that the global setup starts.
 */
/** Miniflare's Hyperdrive insists on a password; a server that trusts local logins ignores it. */
function withPassword(url: string): string {
  const parsed = new URL(url);
  parsed.password ||= 'unused';
  return parsed.href;
}

export default defineConfig({
  resolve: {
    alias: [
      ...packageAliases,
      // node-postgres (the Hyperdrive driver) requires these from CommonJS, and the pool's module loader
      // resolves them to their ESM builds or, without the workerd condition, to an empty socket module:
      // point them at the CommonJS builds that wrangler's bundle uses (node-postgres issue 3700).
      {
        find: /^pg-protocol$/,
        replacement: fileURLToPath(new URL('./node_modules/pg-protocol/dist/index.js', import.meta.url)),
      },
      {
        find: /^pg-cloudflare$/,
        replacement: fileURLToPath(new URL('./node_modules/pg-cloudflare/dist/index.js', import.meta.url)),
      },
      // The tracing test's OpenTelemetry API: its ESM build imports its own modules without extensions,
      // which the pool's module loader cannot find; its CommonJS build it can.
      {
        find: /^@opentelemetry\/api$/,
        replacement: fileURLToPath(new URL('./node_modules/@opentelemetry/api/build/src/index.js', import.meta.url)),
      },
    ],
  },
  plugins: [
    // A function, so the bindings can take what the global setups provided.
    cloudflareTest(({ inject }) => ({
      wrangler: { configPath: './wrangler.toml' },
      miniflare: {
        bindings: {
          DATABASE_URL: inject('workerDatabaseUrl'),
          LOCAL_NEON_PROXY: inject('neonProxy'),
          // Test values only: the HTTP API's admin key, status-token secret and CORS origins.
          ADMIN_TOKEN: 'test-admin-token-of-the-workerd-suite',
          // Dev mode registers the demo jobs, which the helper drains (Durable Objects, so this env) run.
          SKIPLOCK_DEV: '1',
          STATUS_TOKEN_SECRET: 'test-status-token-secret-of-the-workerd-suite',
          CORS_ORIGINS: 'https://app.example.test,https://admin.example.test',
        },
        // The same database through Miniflare's local Hyperdrive: tests bind it as HYPERDRIVE where they want it.
        hyperdrives: { TEST_HYPERDRIVE: withPassword(inject('workerDatabaseUrl')) },
        // Miniflare's local rate limit binding: tests bind it as AUTH_RATE_LIMITER where they want it.
        ratelimits: { TEST_AUTH_RATE_LIMITER: { simple: { limit: 3, period: 60 } } },
        // A local Cloudflare queue for the bulk delivery tests, and the Worker that consumes it (QUEUE_SINK reads what it got).
        // DELIVERY_QUEUE_TEST binds the same queue under a name a queue's delivery target may give.
        queueProducers: {
          TEST_QUEUE: { queueName: 'skiplock-test-queue' },
          DELIVERY_QUEUE_TEST: { queueName: 'skiplock-test-queue' },
        },
        serviceBindings: { QUEUE_SINK: 'queue-sink' },
        workers: [
          {
            name: 'queue-sink',
            modules: true,
            scriptPath: fileURLToPath(new URL('./test/worker/support/queue-sink.js', import.meta.url)),
            compatibilityDate: '2025-09-01',
            queueConsumers: { 'skiplock-test-queue': { maxBatchSize: 100, maxBatchTimeout: 1 } },
          },
        ],
      },
    })),
  ],
  test: {
    include: ['test/worker/**/*.test.ts'],
    // In this order: the second starts the proxy in front of the first one's Postgres.
    globalSetup: ['test/support/global-setup.ts', 'test/worker/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
