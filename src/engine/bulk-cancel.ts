import type { Queryable } from '../db/types.js';
import { type BatchOutcome, LIVE_MATCHES } from './bulk-filter.js';

/**
 * One batch of a bulk cancel: up to $3 live jobs after the id $2 in id
 * order, matching the filter $1, as `cancel` does one: a waiting (or held,
 * or parked) job ends cancelled, a running one is asked to stop at its next
 * heartbeat. A running job already asked counts as matched, not changed.
 * Rows a claim or a heartbeat holds are skipped, never waited for.
 */
const cancelBatchSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT j.id, j.state FROM skiplock.jobs j
  WHERE j.id > $2::uuid AND ${LIVE_MATCHES}
  ORDER BY j.id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
requested AS (
  UPDATE skiplock.jobs j
  SET cancel_requested_at = now()
  FROM target t
  WHERE j.id = t.id AND t.state = 'running' AND j.cancel_requested_at IS NULL
  RETURNING j.id, j.attempts
),
ended AS (
  DELETE FROM skiplock.jobs j
  USING target t
  WHERE j.id = t.id AND t.state <> 'running'
  RETURNING skiplock.as_finished(j, 'cancelled', NULL, NULL) AS finished
),
finished AS (
  INSERT INTO skiplock.finished_jobs
  SELECT (ended.finished).* FROM ended
  RETURNING finished_jobs.id, finished_jobs.attempts
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT id, 'cancel_requested', attempts, jsonb_build_object('bulk', 'cancel') FROM requested
  UNION ALL
  SELECT id, 'cancelled', attempts, jsonb_build_object('bulk', 'cancel') FROM finished
)
SELECT (SELECT count(*) FROM target)::integer AS matched,
       ((SELECT count(*) FROM finished) + (SELECT count(*) FROM requested))::integer AS changed,
       (SELECT count(*) FROM requested)::integer AS requested,
       (SELECT t.id FROM target t ORDER BY t.id DESC LIMIT 1) AS last_id`;

export async function cancelBatch(
  db: Queryable,
  batch: { filter: string; after: string; size: number },
): Promise<BatchOutcome> {
  const [row] = await db.query<BatchOutcome>({
    name: 'skiplock_bulk_cancel_batch',
    text: cancelBatchSql,
    params: [batch.filter, batch.after, batch.size],
  });
  return row!;
}
