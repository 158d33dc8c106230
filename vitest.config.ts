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
    // Each file has its own databases and Worker; three at a time keep both cores busy while one waits on I/O.
    maxWorkers: 3,
    // A deadline for a test that hangs, not a measure: a file that runs the CLI a dozen times needs it on a loaded machine.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // expect.poll waits for a state: give up only on a deadline a loaded machine cannot reach by being slow (its default is 1 s).
    expect: { poll: { timeout: 30_000 } },
  },
});
