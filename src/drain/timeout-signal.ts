/**
 * A signal that aborts when `signal` does, or after `ms` with a
 * TimeoutError, as `AbortSignal.any([signal, AbortSignal.timeout(ms)])`
 * would; `clear()` once the work it bounds is done. Not that expression
 * itself: Node holds a timeout signal inside AbortSignal.any only weakly,
 * and a garbage collection before it fires loses the timeout
 * (nodejs/node#57736), so a request to a server that never answers hangs
 * until something else stops it. Here the timer holds its controller.
 */
export function timeoutSignal(signal: AbortSignal | undefined, ms: number): { signal: AbortSignal; clear(): void } {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError')), ms);
  return {
    signal: signal === undefined ? timeout.signal : AbortSignal.any([signal, timeout.signal]),
    clear: () => clearTimeout(timer),
  };
}
