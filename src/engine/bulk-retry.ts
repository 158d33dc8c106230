import type { Queryable } from '../db/types.js';
import { type BatchOutcome, FINISHED_MATCHES } from './bulk-filter.js';

/**
 * One batch of a bulk retry or redrive: up to $3 finished jobs in one of the
 * states $4, after the id $2 in id order, matching the filter $1, each queued
 * again with a fresh set of attempts (as `retry` does one), in the queue $5
 * when given. Rows another transaction holds are skipped, never waited for.
 * A job whose dedup key another job holds now stays finished (an enqueue of
 * that key would have returned the holder), as does all but the first of a
 * batch's jobs sharing a key; both count as matched, not changed.
 */
const retryBatchSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT f.id, f.finished_at, f.tenant, f.queue AS from_queue, coalesce($5::text, f.queue) AS queue, f.dedup_key
  FROM skiplock.finished_jobs f
  WHERE f.id > $2::uuid AND f.state = ANY ($4::text[]) AND ${FINISHED_MATCHES}
  ORDER BY f.id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
movable AS (
  SELECT t.id, t.finished_at, t.queue, t.from_queue FROM target t WHERE t.dedup_key IS NULL
  UNION ALL
  (SELECT DISTINCT ON (t.tenant, t.queue, t.dedup_key) t.id, t.finished_at, t.queue, t.from_queue
   FROM target t
   WHERE t.dedup_key IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM skiplock.dedup_keys h
                     WHERE (h.tenant, h.queue, h.dedup_key) = (t.tenant, t.queue, t.dedup_key)
                       AND h.job_id <> t.id AND (h.expires_at IS NULL OR h.expires_at > now()))
   ORDER BY t.tenant, t.queue, t.dedup_key, t.id)
),
gone AS (
  DELETE FROM skiplock.finished_jobs f
  USING movable m
  WHERE f.id = m.id AND f.finished_at = m.finished_at
  RETURNING f, m.queue AS to_queue
),
back AS (
  INSERT INTO skiplock.jobs
  SELECT r.* FROM gone, LATERAL skiplock.requeued_job(gone.f, gone.to_queue) r
  RETURNING id
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT m.id, 'retried', 0,
         jsonb_build_object('bulk', $6::text)
           || CASE WHEN m.queue <> m.from_queue THEN jsonb_build_object('fromQueue', m.from_queue) ELSE '{}' END
  FROM back JOIN movable m ON m.id = back.id
),
-- A keyed job takes its key's turn again, settled by the jobs table's insert
-- trigger at the end of this statement (as retry's).
rekeyed AS (
  UPDATE skiplock.keyed_jobs k SET slot = NULL FROM back WHERE k.job_id = back.id
)
SELECT (SELECT count(*) FROM target)::integer AS matched,
       (SELECT count(*) FROM back)::integer AS changed,
       (SELECT t.id FROM target t ORDER BY t.id DESC LIMIT 1) AS last_id`;

export async function retryBatch(
  db: Queryable,
  batch: { filter: string; after: string; size: number; states: readonly string[]; toQueue?: string; action: string },
): Promise<BatchOutcome> {
  const [row] = await db.query<BatchOutcome>({
    name: 'skiplock_bulk_retry_batch',
    text: retryBatchSql,
    params: [batch.filter, batch.after, batch.size, batch.states, batch.toQueue ?? null, batch.action],
  });
  return row!;
}
