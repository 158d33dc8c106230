/**
 * How long a test waits for a state by default: long enough for a loaded CI
 * machine, and short of the tests' own timeouts (30 s in workerd, 60 s in
 * Node), so that the failure names the state.
 */
const DEFAULT_TIMEOUT_MS = 20_000;

export interface WaitForOptions {
  /** Give up after this long (a deadline, not a duration the test relies on). */
  timeoutMs?: number;
  /** Pause between two looks. */
  everyMs?: number;
}

/**
 * Looks at `check` until it answers something other than undefined, null or
 * false, and answers that. Past the deadline it fails naming what it waited
 * for (a function may add what it saw last), instead of letting the test run
 * into its timeout. Works in Node and in workerd alike.
 *
 *   await waitFor(`job ${id} running`, async () => (await jobById(db, id)).status === 'running');
 */
export async function waitFor<T>(
  what: string | (() => string),
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  { timeoutMs = DEFAULT_TIMEOUT_MS, everyMs = 50 }: WaitForOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await check();
    if (seen !== undefined && seen !== null && seen !== false) return seen;
    if (Date.now() >= deadline)
      throw new Error(`waited ${timeoutMs} ms for ${typeof what === 'string' ? what : what()}, in vain`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
