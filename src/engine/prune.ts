import type { Queryable } from '../db/types.js';

/**
 * Deletes finished jobs older than the retention, and their events, in one
 * bounded batch (oldest first, SKIP LOCKED) so pruning never holds long locks
 * or makes one huge transaction. Call again while it returns a full batch.
 */
const pruneSql = /* sql */ `
WITH doomed AS MATERIALIZED (
  SELECT id FROM skiplock.jobs
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'expired')
    AND finished_at < now() - make_interval(secs => $1::float8)
  ORDER BY finished_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
pruned AS (
  DELETE FROM skiplock.jobs j USING doomed WHERE j.id = doomed.id RETURNING j.id
),
pruned_events AS (
  DELETE FROM skiplock.job_events e USING pruned WHERE e.job_id = pruned.id
)
SELECT count(*)::integer AS pruned FROM pruned`;

export interface PruneOptions {
  /** Keep finished jobs this long. */
  retentionSeconds: number;
  /** At most this many jobs per call. Default 1000. */
  limit?: number;
}

export async function pruneFinishedJobs(db: Queryable, options: PruneOptions): Promise<number> {
  const [row] = await db.query<{ pruned: number }>({
    name: 'skiplock_prune',
    text: pruneSql,
    params: [options.retentionSeconds, options.limit ?? 1000],
  });
  return row?.pruned ?? 0;
}
