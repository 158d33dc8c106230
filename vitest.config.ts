import { defineConfig } from 'vitest/config';
import { packageAliases } from './test/support/package-aliases';

export default defineConfig({
  resolve: { alias: packageAliases },
  test: {
    // Pure logic is tested beside its code (src/), the rest in test/.
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // The Worker tests run in workerd (vitest.workers.config.ts); the fault and
    // security suites have their own runs (npm run test:faults, npm run test:security).
    exclude: ['test/worker/**', 'test/faults/**', 'test/security/**', 'node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
