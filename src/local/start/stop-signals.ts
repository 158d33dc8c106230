const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export interface StopRequest {
  /** Aborted by the first stop signal, with the signal's name as the reason. */
  readonly signal: AbortSignal;
  /** Resolves on the first stop signal, also for whoever starts waiting after it came. */
  readonly received: Promise<void>;
}

/**
 * Listens for Ctrl-C, SIGTERM and a closed terminal. Handling them replaces
 * Node's default, exiting on the spot, which would leave Postgres and
 * wrangler running. The same Ctrl-C can arrive twice (from the terminal and
 * again from npm); one stop is enough.
 */
export function listenForStopSignals(): StopRequest {
  const controller = new AbortController();
  const received = new Promise<void>((resolve) =>
    controller.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  for (const name of STOP_SIGNALS) process.on(name, () => controller.abort(name));
  return { signal: controller.signal, received };
}
