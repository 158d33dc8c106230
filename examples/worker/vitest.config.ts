import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

/**
 * node-postgres (skiplock's driver over Hyperdrive) requires pg-protocol and
 * pg-cloudflare from CommonJS, and the test pool's module loader resolves
 * them to builds that do not load there (node-postgres issue 3700). Point
 * them at their CommonJS builds, as wrangler's own bundle does. Only tests
 * that bind Hyperdrive need this.
 */
const fromPg = createRequire(createRequire(import.meta.url).resolve('pg'));
// Both resolve, for require, to a file in the folder of their CommonJS index.js.
const commonJsBuild = (name: string) => join(dirname(fromPg.resolve(name)), 'index.js');

/**
 * The Worker runs in workerd with wrangler.jsonc, reaching the test database
 * through Miniflare's local Hyperdrive (node-postgres inside the Worker).
 * test/global-setup.ts migrates that database with `skiplock migrate`.
 */
export default defineConfig({
  resolve: {
    alias: [
      { find: /^pg-protocol$/, replacement: commonJsBuild('pg-protocol') },
      { find: /^pg-cloudflare$/, replacement: commonJsBuild('pg-cloudflare') },
    ],
  },
  plugins: [
    cloudflareTest(({ inject }) => ({
      wrangler: { configPath: './wrangler.jsonc' },
      miniflare: {
        hyperdrives: { HYPERDRIVE: inject('databaseUrl') },
        bindings: {
          // Test values only; a deploy sets these with `wrangler secret put`.
          ADMIN_TOKEN: 'example-admin-token-for-tests-only',
          STATUS_TOKEN_SECRET: 'example-status-token-secret-for-tests-only',
          // The test fires scheduled() itself, so nothing drains behind its back.
          FAST_PATH: 'off',
        },
      },
    })),
  ],
  test: {
    globalSetup: ['./test/global-setup.ts'],
    testTimeout: 30_000,
  },
});
