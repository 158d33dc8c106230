import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import type { Job } from './types.js';

/**
 * Takes running jobs back from workers that are gone: either every job whose
 * lease ran out (the reaper) or every job of one named worker (a worker that
 * knows it crashed). The attempt counts: the job goes back to the queue, or
 * fails when its attempts are spent, or ends cancelled if that was asked.
 * Bounded and SKIP LOCKED, so overlapping reapers split the work.
 */
const reclaimSql = /* sql */ `WITH abandoned AS MATERIALIZED (
  SELECT id,
         CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
              WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END AS next
  FROM skiplock.jobs
  WHERE state = 'running'
    AND CASE WHEN $1::text IS NULL THEN lease_expires_at < now() ELSE worker_id = $1 END
    AND ($4::text IS NULL OR tenant = $4)
  ORDER BY lease_expires_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
requeued AS (
  UPDATE skiplock.jobs j
  SET state = 'queued', run_at = now(), lease_token = NULL, lease_expires_at = NULL,
      last_error = jsonb_build_object('message', $3::text, 'workerId', j.worker_id, 'attempt', j.attempts)
  FROM abandoned a
  WHERE j.id = a.id AND a.next = 'queued'
  RETURNING j.id, j.attempts, j.worker_id, j.started_at, 'queued' AS next, skiplock.job_json(j) AS job
),
ended AS (
  DELETE FROM skiplock.jobs j
  USING abandoned a
  WHERE j.id = a.id AND a.next <> 'queued'
  RETURNING skiplock.as_finished(j, a.next, NULL,
              jsonb_build_object('message', $3::text, 'workerId', j.worker_id, 'attempt', j.attempts)) AS finished
),
finished AS (
  INSERT INTO skiplock.finished_jobs
  SELECT (ended.finished).* FROM ended
  RETURNING finished_jobs.id, finished_jobs.attempts, finished_jobs.worker_id, finished_jobs.started_at,
            finished_jobs.state AS next, skiplock.job_json(finished_jobs) AS job
),
ended_attempt AS (
  SELECT * FROM requeued UNION ALL SELECT * FROM finished
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, CASE WHEN $1::text IS NULL THEN 'lease_expired' ELSE 'released' END, attempts, worker_id,
         jsonb_build_object('next', next, 'startedAt', started_at)
  FROM ended_attempt
)
SELECT job FROM ended_attempt`;

export interface ReclaimOptions {
  /** At most this many jobs per call; call again while it returns a full batch. */
  limit?: number;
}

/** Returns jobs whose lease expired to the queue (or fails them when attempts are spent). */
export async function reapExpiredLeases(db: Queryable, options: ReclaimOptions = {}): Promise<Job[]> {
  const rows = await db.query<{ job: Job }>({
    name: 'skiplock_reclaim',
    text: reclaimSql,
    params: [null, options.limit ?? 1000, 'lease expired before the job finished', null],
  });
  return rows.map((row) => toJob(row.job));
}

export interface ReleaseWorkerOptions extends ReclaimOptions {
  /** Only this tenant's jobs (a tenant-bound caller's). */
  tenant?: string;
}

/** Hands back every job a worker holds, at once: for a worker that restarts after a crash. */
export async function releaseWorker(
  db: Queryable,
  workerId: string,
  options: ReleaseWorkerOptions = {},
): Promise<Job[]> {
  const rows = await db.query<{ job: Job }>({
    name: 'skiplock_reclaim',
    text: reclaimSql,
    params: [workerId, options.limit ?? 1000, 'worker released its leases', options.tenant ?? null],
  });
  return rows.map((row) => toJob(row.job));
}
