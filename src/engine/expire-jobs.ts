import { WAITING_STATE } from './waiting-state.js';
import type { Queryable } from '../db/types.js';

/** Waiting jobs past their expires_at never run: they become expired. Bounded and SKIP LOCKED. */
const expireJobsSql = /* sql */ `WITH due AS MATERIALIZED (
  SELECT id FROM skiplock.jobs
  WHERE expires_at <= now() AND ${WAITING_STATE}
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
ended AS (
  DELETE FROM skiplock.jobs j USING due WHERE j.id = due.id RETURNING skiplock.as_finished(j, 'expired', NULL, NULL) AS finished
),
finished AS (
  INSERT INTO skiplock.finished_jobs
  SELECT (ended.finished).* FROM ended
  RETURNING finished_jobs.id, finished_jobs.attempts
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, 'expired', attempts FROM finished
)
SELECT count(*)::integer AS expired FROM finished`;

/** Finished jobs whose dedup window has passed free their key for new jobs. */
const releaseLapsedDedupKeysSql = /* sql */ `WITH lapsed AS MATERIALIZED (
  SELECT tenant, queue, dedup_key FROM skiplock.dedup_keys
  WHERE expires_at <= now()
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
released AS (
  DELETE FROM skiplock.dedup_keys k
  USING lapsed l
  -- Checked again under the lock: an enqueue may have taken the key meanwhile.
  WHERE (k.tenant, k.queue, k.dedup_key) = (l.tenant, l.queue, l.dedup_key) AND k.expires_at <= now()
  RETURNING k.job_id
)
SELECT count(*)::integer AS released FROM released`;

export async function expireJobs(db: Queryable, options: { limit?: number } = {}): Promise<number> {
  const [row] = await db.query<{ expired: number }>({
    name: 'skiplock_expire_jobs',
    text: expireJobsSql,
    params: [options.limit ?? 1000],
  });
  return row?.expired ?? 0;
}

export async function releaseLapsedDedupKeys(db: Queryable, options: { limit?: number } = {}): Promise<number> {
  const [row] = await db.query<{ released: number }>({
    name: 'skiplock_release_lapsed_dedup_keys',
    text: releaseLapsedDedupKeysSql,
    params: [options.limit ?? 1000],
  });
  return row?.released ?? 0;
}
