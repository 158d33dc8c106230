import type { Queryable } from '../db/types.js';
import { type BatchOutcome, FINISHED_MATCHES } from './bulk-filter.js';

/**
 * One batch of a bulk delete: up to $3 finished jobs after the id $2 in id
 * order, matching the filter $1, removed with their history and the dedup
 * key each still holds, which an enqueue may then take
 * (skiplock.delete_finished_jobs). Live jobs are never reached: the history
 * table holds only finished ones. A failed head that holds its ordering key
 * is kept: its key waits on it until an operator retries it or unblocks the
 * key.
 */
const deleteBatchSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT f.id, f.finished_at
  FROM skiplock.finished_jobs f
  WHERE f.id > $2::uuid AND ${FINISHED_MATCHES}
    AND f.id <> ALL (ARRAY(SELECT c.blocked_by FROM skiplock.concurrency_keys c WHERE c.blocked_by IS NOT NULL))
  ORDER BY f.id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
)
SELECT count(*)::integer AS matched,
       skiplock.delete_finished_jobs(array_agg(t.id), array_agg(t.finished_at)) AS changed,
       (SELECT l.id FROM target l ORDER BY l.id DESC LIMIT 1) AS last_id
FROM target t`;

export async function deleteBatch(
  db: Queryable,
  batch: { filter: string; after: string; size: number },
): Promise<BatchOutcome> {
  const [row] = await db.query<BatchOutcome>({
    name: 'skiplock_bulk_delete_batch',
    text: deleteBatchSql,
    params: [batch.filter, batch.after, batch.size],
  });
  return row!;
}
