import type { Queryable } from '../db/types.js';

/** Waiting jobs past their expires_at never run: they become expired. Bounded and SKIP LOCKED. */
const expireJobsSql = /* sql */ `
WITH due AS MATERIALIZED (
  SELECT id FROM skiplock.jobs
  WHERE expires_at <= now() AND state IN ('scheduled', 'queued', 'retrying')
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
expired AS (
  UPDATE skiplock.jobs j SET state = 'expired'
  FROM due WHERE j.id = due.id
  RETURNING j.id, j.attempts
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, 'expired', attempts FROM expired
)
SELECT count(*)::integer AS expired FROM expired`;

/** Finished jobs whose dedup window has passed free their key for new jobs. */
const releaseLapsedDedupKeysSql = /* sql */ `
WITH lapsed AS MATERIALIZED (
  SELECT id FROM skiplock.jobs
  WHERE dedup_key IS NOT NULL AND finished_at IS NOT NULL
    AND finished_at + make_interval(secs => dedup_window_seconds) <= now()
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
released AS (
  UPDATE skiplock.jobs j SET dedup_key = NULL FROM lapsed WHERE j.id = lapsed.id RETURNING j.id
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
