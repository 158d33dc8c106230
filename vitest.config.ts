import { defineConfig } from 'vitest/config';
import { packageAliases } from './test/support/package-aliases';

export default defineConfig({
  resolve: { alias: packageAliases },
  test: {
    // Pure logic is tested beside its code (src/), the rest in test/.
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // The Worker tests run in workerd (vitest.workers.config.ts); the fault suite
    // has its own run (npm run test:faults, vitest.faults.config.ts).
    exclude: ['test/worker/**', 'test/faults/**', 'node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
