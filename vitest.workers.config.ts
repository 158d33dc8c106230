import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

/**
 * The Worker tests: they run inside workerd (the Workers runtime) with the
 * Worker from wrangler.toml, and reach the run's real Postgres through the real
 * Neon drivers and the local Neon proxy that the global setup starts.
 */
export default defineConfig({
  plugins: [
    // A function, so the bindings can take what the global setups provided.
    cloudflareTest(({ inject }) => ({
      wrangler: { configPath: './wrangler.toml' },
      miniflare: {
        bindings: {
          DATABASE_URL: inject('workerDatabaseUrl'),
          LOCAL_NEON_PROXY: inject('neonProxy'),
          // Test values only: the HTTP API's admin key, status-token secret and CORS origins.
          ADMIN_TOKEN: 'test-admin-token',
          STATUS_TOKEN_SECRET: 'test-status-token-secret',
          CORS_ORIGINS: 'https://app.example.test,https://admin.example.test',
        },
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
