import { defineConfig } from 'vitest/config';
import { packageAliases } from './test/support/package-aliases';

/**
 * `npm run test:faults`: the reliability suite. It kills, restarts and cuts,
 * then counts what was lost, what ran twice at once and which limit broke.
 * One scenario at a time (they load the machine on purpose), against the
 * same real Postgres as `npm test`; the last teardown writes the report (docs/reliability.md
 * with UPDATE_RELIABILITY_REPORT=1, else the temporary folder).
 */
export default defineConfig({
  resolve: { alias: packageAliases },
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts', 'test/faults/support/report-setup.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
