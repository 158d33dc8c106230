import type { Queryable } from '../db/types';
import { StaleLeaseError } from './errors';
import type { Job, Lease } from './types';

export interface ReleaseOptions {
  /** Back in the queue after this delay; at once when left out. */
  delaySeconds?: number;
  /**
   * Whether the attempt counts. Default false: a job handed back unstarted
   * (the drain ran out of time) keeps its attempts.
   */
  countAttempt?: boolean;
}

/** Hands a claimed job back before it finished. */
const releaseSql = /* sql */ `
WITH released AS (
  UPDATE skiplock.jobs j
  SET state = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                   WHEN $3::float8 > 0 THEN 'scheduled' ELSE 'queued' END,
      run_at = now() + make_interval(secs => $3::float8),
      attempts = CASE WHEN $4::boolean THEN attempts ELSE attempts - 1 END,
      lease_expires_at = NULL
  WHERE id = $1 AND lease_token = $2 AND state = 'running'
  RETURNING id, attempts, worker_id, state, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, CASE state WHEN 'cancelled' THEN 'cancelled' ELSE 'released' END, attempts, worker_id,
         jsonb_build_object('delaySeconds', $3::float8, 'attemptCounted', $4::boolean)
  FROM released
)
SELECT job FROM released`;

export async function release(db: Queryable, lease: Lease, options: ReleaseOptions = {}): Promise<Job> {
  const [row] = await db.query<{ job: Job }>({
    text: releaseSql,
    params: [lease.id, lease.leaseToken, options.delaySeconds ?? 0, options.countAttempt ?? false],
  });
  if (!row) throw new StaleLeaseError([lease.id]);
  return row.job;
}
