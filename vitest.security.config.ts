import { defineConfig } from 'vitest/config';
import { packageAliases } from './test/support/package-aliases';

/**
 * `npm run test:security`: the findings of the security review (issue 17) as
 * regression tests against a running stack, `npm start` on a fresh checkout
 * (test/security/support/running-stack.ts). One file at a time: they share
 * that stack, and one of them makes the stack turn a client away.
 * docs/security.md says what each checks.
 */
export default defineConfig({
  resolve: { alias: packageAliases },
  test: {
    include: ['test/security/**/*.test.ts'],
    globalSetup: ['test/security/support/running-stack.ts'],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
