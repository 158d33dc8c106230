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
const failSql = /* sql */ `
WITH current AS (
  SELECT id,
         CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
              WHEN $4::boolean OR attempts >= max_attempts THEN 'failed'
              ELSE 'retrying' END AS next_state,
         coalesce($5::float8,
                  random() * least(backoff_max_seconds, backoff_base_seconds * 2 ^ (attempts - 1))) AS delay
  FROM skiplock.jobs
  WHERE id = $1
),
failed AS (
  UPDATE skiplock.jobs j
  SET state = c.next_state, last_error = $3::jsonb, lease_token = NULL,
      run_at = CASE WHEN c.next_state = 'retrying' THEN now() + make_interval(secs => c.delay) ELSE j.run_at END
  FROM current c
  -- The token matches only while the job runs (jobs_lease_while_running).
  WHERE j.id = c.id AND j.lease_token = $2
  RETURNING j.id, j.attempts, j.worker_id, j.state, j.run_at, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, CASE state WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END, attempts, worker_id,
         jsonb_build_object('error', $3::jsonb, 'retryAt',
                            CASE WHEN state = 'retrying' THEN skiplock.iso(run_at) END)
  FROM failed
)
SELECT job FROM failed`;

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
