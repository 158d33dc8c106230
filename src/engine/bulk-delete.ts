import type { Queryable } from '../db/types.js';
import { type BatchOutcome, FINISHED_MATCHES } from './bulk-filter.js';

/**
 * One batch of a bulk delete: up to $3 finished jobs after the id $2 in id
 * order, matching the filter $1, removed with their history (events, durable
 * steps, links) and the dedup key each still holds, which an enqueue may
 * then take. Live jobs are never reached: the history table holds only
 * finished ones. A failed head that holds its ordering key is kept: its key
 * waits on it until an operator retries it or unblocks the key.
 */
const deleteBatchSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT f.id, f.finished_at, f.tenant, f.queue, f.dedup_key
  FROM skiplock.finished_jobs f
  WHERE f.id > $2::uuid AND ${FINISHED_MATCHES}
    AND f.id <> ALL (ARRAY(SELECT c.blocked_by FROM skiplock.concurrency_keys c WHERE c.blocked_by IS NOT NULL))
  ORDER BY f.id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
gone AS (
  DELETE FROM skiplock.finished_jobs f USING target t
  WHERE f.id = t.id AND f.finished_at = t.finished_at
  RETURNING f.id
),
events AS (
  DELETE FROM skiplock.job_events e USING gone g WHERE e.job_id = g.id
),
steps AS (
  DELETE FROM skiplock.job_steps s USING gone g WHERE s.job_id = g.id
),
links AS (
  DELETE FROM skiplock.job_links l USING gone g WHERE l.job_id = g.id
),
keyed AS (
  DELETE FROM skiplock.keyed_jobs k USING gone g WHERE k.job_id = g.id
),
keys AS (
  DELETE FROM skiplock.dedup_keys k USING target t
  WHERE (k.tenant, k.queue, k.dedup_key) = (t.tenant, t.queue, t.dedup_key) AND k.job_id = t.id
)
SELECT (SELECT count(*) FROM target)::integer AS matched,
       (SELECT count(*) FROM gone)::integer AS changed,
       (SELECT t.id FROM target t ORDER BY t.id DESC LIMIT 1) AS last_id`;

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
