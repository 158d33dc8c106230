import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job, Json, Lease } from './types.js';

export interface Failure extends Lease {
  /** What went wrong; stored as the job's lastError. */
  error: Json;
  /** Retry after exactly this long instead of the job's backoff. */
  retryInSeconds?: number;
  /** No retry: the job can never succeed (bad payload, 4xx from a webhook). */
  forGood?: boolean;
}

/**
 * Ends an attempt with an error. The job retries after its backoff (full
 * jitter: a uniform draw from 0 to min(max, base * 2^(attempt-1)) seconds)
 * unless its attempts are spent or the failure is for good; a job whose
 * cancellation was asked for ends cancelled.
 */
const failSql = /* sql */ `WITH attempt AS (
  SELECT j.id,
         CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
              WHEN $4::boolean OR j.attempts >= j.max_attempts THEN 'failed'
              ELSE 'retrying' END AS outcome,
         coalesce($5::float8,
                  random() * least(j.backoff_max_seconds, j.backoff_base_seconds * 2 ^ (j.attempts - 1))) AS delay
  FROM skiplock.jobs j
  -- The token matches only while the job runs (jobs_lease_while_running).
  WHERE j.id = $1 AND j.lease_token = $2
),
retrying AS (
  UPDATE skiplock.jobs j
  SET state = 'retrying', last_error = $3::jsonb, lease_token = NULL, lease_expires_at = NULL,
      run_at = now() + make_interval(secs => a.delay)
  FROM attempt a
  WHERE j.id = a.id AND j.lease_token = $2 AND a.outcome = 'retrying'
  RETURNING j.id, j.attempts, j.worker_id, j.started_at, 'retrying'::text AS outcome, j.run_at,
            skiplock.job_json(j) AS job
),
ended AS (
  DELETE FROM skiplock.jobs j
  USING attempt a
  WHERE j.id = a.id AND j.lease_token = $2 AND a.outcome <> 'retrying'
  RETURNING j AS live, a.outcome
),
finished AS (
  INSERT INTO skiplock.finished_jobs
  SELECT (skiplock.as_finished(ended.live, ended.outcome, NULL, $3::jsonb)).* FROM ended
  RETURNING finished_jobs.id, finished_jobs.attempts, finished_jobs.worker_id, finished_jobs.started_at,
            finished_jobs.state AS outcome, NULL::timestamptz AS run_at, skiplock.job_json(finished_jobs) AS job
),
ended_attempt AS (
  SELECT * FROM retrying UNION ALL SELECT * FROM finished
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, CASE outcome WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END, attempts, worker_id,
         jsonb_build_object('error', $3::jsonb, 'startedAt', started_at,
                            'retryAt', CASE WHEN outcome = 'retrying' THEN skiplock.iso(run_at) END)
  FROM ended_attempt
)
SELECT job FROM ended_attempt`;

export async function fail(db: Queryable, failure: Failure): Promise<Job> {
  const [row] = await db.query<{ job: Job }>({
    name: 'skiplock_fail',
    text: failSql,
    params: [
      failure.id,
      failure.leaseToken,
      JSON.stringify(failure.error),
      failure.forGood ?? false,
      failure.retryInSeconds ?? null,
    ],
  });
  if (!row) throw new StaleLeaseError([failure.id]);
  return toJob(row.job);
}
