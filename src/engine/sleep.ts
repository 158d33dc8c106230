/**
 * Resolves after `ms`, or as soon as `signal` aborts; never rejects. The
 * timer is cleared either way, so nothing outlives the awaited work (on
 * Workers an un-awaited timer is cancelled when the invocation ends).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
