/**
 * The worker ids skiplock makes for its own drains (a Worker's cron, fast-path
 * and helper drains, `drainOnce`, a Node worker without WORKER_ID) begin
 * with this. The pull API refuses ids that do: no API key claims under a
 * drain's id, is bound to one, or hands back what a drain runs.
 */
export const DRAIN_WORKER_ID_PREFIX = 'skiplock:';

/** A new worker id for one of skiplock's drains: `skiplock:cron-1a2b3c4d`. */
export function drainWorkerId(kind: string): string {
  return `${DRAIN_WORKER_ID_PREFIX}${kind}-${crypto.randomUUID().slice(0, 8)}`;
}
