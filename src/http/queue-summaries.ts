import type { JobStatus, QueueStatsRow } from '../engine/index.js';

export interface QueueSummary {
  queue: string;
  counts: Record<JobStatus, number>;
  oldestWaitSeconds: number | null;
}

function noJobs(): Record<JobStatus, number> {
  return { scheduled: 0, queued: 0, running: 0, retrying: 0, succeeded: 0, failed: 0, cancelled: 0, expired: 0 };
}

/** Folds the per-tenant stats rows into one summary per queue, in queue order. */
export function summarizeQueues(rows: readonly QueueStatsRow[]): QueueSummary[] {
  const byQueue = new Map<string, QueueSummary>();
  for (const row of rows) {
    let summary = byQueue.get(row.queue);
    if (summary === undefined) {
      summary = { queue: row.queue, counts: noJobs(), oldestWaitSeconds: null };
      byQueue.set(row.queue, summary);
    }
    summary.counts[row.status] += row.count;
    if (row.oldestWaitSeconds !== null) {
      summary.oldestWaitSeconds = Math.max(summary.oldestWaitSeconds ?? 0, row.oldestWaitSeconds);
    }
  }
  return [...byQueue.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
}
