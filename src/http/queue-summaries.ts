import type { HeldCounts, JobStatus, QueueSettings, QueueStatsRow } from '../engine/index.js';

export interface QueueSummary extends QueueSettings {
  queue: string;
  counts: Record<JobStatus, number>;
  oldestWaitSeconds: number | null;
  held: number;
  heldBy: HeldCounts;
  debounced: number;
}

function noJobs(): Record<JobStatus, number> {
  return { scheduled: 0, queued: 0, running: 0, retrying: 0, succeeded: 0, failed: 0, cancelled: 0, expired: 0 };
}

/**
 * Folds the per-tenant stats rows into one summary per queue, in queue
 * order, each with its settings (the defaults where it has none).
 */
export function summarizeQueues(
  rows: readonly QueueStatsRow[],
  settings: ReadonlyArray<QueueSettings & { name: string }>,
): QueueSummary[] {
  const settingsOf = new Map(settings.map(({ name, ...own }) => [name, own]));
  const byQueue = new Map<string, QueueSummary>();
  for (const row of rows) {
    let summary = byQueue.get(row.queue);
    if (summary === undefined) {
      const own = settingsOf.get(row.queue) ?? {
        concurrency: null,
        weight: 1,
        delivery: null,
        pausedAt: null,
        retentionSeconds: null,
        deadLetterQueue: null,
        rateLimit: null,
      };
      const heldBy = { concurrency: 0, order: 0, failedHead: 0, rate: 0 };
      summary = { queue: row.queue, counts: noJobs(), oldestWaitSeconds: null, held: 0, heldBy, debounced: 0, ...own };
      byQueue.set(row.queue, summary);
    }
    summary.counts[row.status] += row.count;
    summary.held += row.held;
    summary.debounced += row.debounced;
    for (const reason of Object.keys(summary.heldBy) as (keyof HeldCounts)[]) {
      summary.heldBy[reason] += row.heldBy[reason];
    }
    if (row.oldestWaitSeconds !== null) {
      summary.oldestWaitSeconds = Math.max(summary.oldestWaitSeconds ?? 0, row.oldestWaitSeconds);
    }
  }
  return [...byQueue.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
}
