import type { Queryable } from '../db/types.js';

/**
 * Retention of the history. The days of finished jobs older than the
 * retention are dropped whole, and the partitions of the days ahead made
 * (skiplock.maintain_finished_jobs), so a finished job is kept at least the
 * retention and at most a day longer, and pruning leaves nothing to vacuum.
 * Nothing goes before the statistics' rollup has summed it. The trace
 * contexts of jobs no longer live go in the same statement, at most 10,000
 * a call (skiplock.prune_trace_contexts), with no round trip of their own.
 */
const maintainHistorySql = /* sql */ `
SELECT created, dropped, deleted, skiplock.prune_trace_contexts(10000) AS trace_contexts
FROM skiplock.maintain_finished_jobs(make_interval(secs => $1::float8))`;

/**
 * Events older than the retention, in one bounded batch, oldest first; never
 * past what the statistics' rollup has summed (an attempt's run time is in
 * its event).
 */
const pruneEventsSql = /* sql */ `
WITH doomed AS MATERIALIZED (
  SELECT id FROM skiplock.job_events
  WHERE at < least(now() - make_interval(secs => $1::float8), (SELECT rolled_through FROM skiplock.attempt_stats_rollup))
  ORDER BY at
  LIMIT $2
),
pruned AS (
  DELETE FROM skiplock.job_events e USING doomed WHERE e.id = doomed.id RETURNING e.id
)
SELECT count(*)::integer AS pruned FROM pruned`;

export interface RetentionOptions {
  /** Keep finished jobs, and events, at least this long. */
  retentionSeconds: number;
}

export interface HistoryMaintenance {
  /** Partitions made for the days ahead. */
  createdDays: number;
  /** Days of finished jobs dropped past the retention. */
  droppedDays: number;
  /** Finished jobs deleted one by one (at most 10,000 a call): those of a day that had no partition of its own. */
  deletedJobs: number;
  /** Trace contexts deleted: those of jobs that finished (see skiplock.job_trace_contexts). */
  prunedTraceContexts: number;
}

/** Drops the days past the retention and prepares the days ahead. */
export async function maintainHistory(db: Queryable, options: RetentionOptions): Promise<HistoryMaintenance> {
  const [row] = await db.query<{ created: number; dropped: number; deleted: number; trace_contexts: number }>({
    name: 'skiplock_maintain_history',
    text: maintainHistorySql,
    params: [options.retentionSeconds],
  });
  return {
    createdDays: row?.created ?? 0,
    droppedDays: row?.dropped ?? 0,
    deletedJobs: row?.deleted ?? 0,
    prunedTraceContexts: row?.trace_contexts ?? 0,
  };
}

/** Deletes up to `limit` (default 1000) events past the retention; call again while it returns a full batch. */
export async function pruneEvents(db: Queryable, options: RetentionOptions & { limit?: number }): Promise<number> {
  const [row] = await db.query<{ pruned: number }>({
    name: 'skiplock_prune_events',
    text: pruneEventsSql,
    params: [options.retentionSeconds, options.limit ?? 1000],
  });
  return row?.pruned ?? 0;
}
