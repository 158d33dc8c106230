import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job, Lease } from './types.js';

export interface ReleaseOptions {
  /** Back in the queue after this delay; at once when left out. */
  delaySeconds?: number;
  /**
   * Whether the attempt counts. Default false: a job handed back unstarted
   * (the drain ran out of time) keeps its attempts.
   */
  countAttempt?: boolean;
}

/** Hands claimed jobs back before they finished (one statement for any number). */
const releaseSql = /* sql */ `WITH input AS MATERIALIZED (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, "leaseToken" uuid)
),
handed_back AS (
  UPDATE skiplock.jobs j
  SET state = CASE WHEN $2::float8 > 0 THEN 'scheduled' ELSE 'queued' END,
      run_at = now() + make_interval(secs => $2::float8),
      attempts = CASE WHEN $3::boolean THEN j.attempts ELSE j.attempts - 1 END,
      lease_token = NULL, lease_expires_at = NULL
  FROM input
  -- By key, and the token alone proves the job runs (see complete.ts).
  WHERE j.id = input.id AND j.lease_token = input."leaseToken" AND j.cancel_requested_at IS NULL
  RETURNING j.id, CASE WHEN $3::boolean THEN j.attempts ELSE j.attempts + 1 END AS attempt, j.worker_id,
            j.started_at, 'released' AS kind, CASE WHEN $4::boolean THEN skiplock.job_json(j) END AS job
),
-- A job whose cancellation was asked for ends cancelled instead of waiting again.
cancelled AS (
  DELETE FROM skiplock.jobs j
  USING input
  WHERE j.id = input.id AND j.lease_token = input."leaseToken" AND j.cancel_requested_at IS NOT NULL
  RETURNING skiplock.as_finished(j, 'cancelled', NULL, NULL) AS finished
),
finished AS (
  INSERT INTO skiplock.finished_jobs
  SELECT (cancelled.finished).* FROM cancelled
  RETURNING finished_jobs.id, finished_jobs.attempts AS attempt, finished_jobs.worker_id, finished_jobs.started_at,
            'cancelled' AS kind, CASE WHEN $4::boolean THEN skiplock.job_json(finished_jobs) END AS job
),
ended_attempt AS (
  SELECT * FROM handed_back UNION ALL SELECT * FROM finished
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, kind, attempt, worker_id,
         jsonb_build_object('startedAt', started_at, 'delaySeconds', $2::float8, 'attemptCounted', $3::boolean)
  FROM ended_attempt
)
SELECT id, job FROM ended_attempt`;

async function runReleases(db: Queryable, leases: readonly Lease[], options: ReleaseOptions, withJobs: boolean) {
  return db.query<{ id: string; job: Job | null }>({
    name: 'skiplock_release',
    text: releaseSql,
    params: [
      JSON.stringify(leases.map(({ id, leaseToken }) => ({ id, leaseToken }))),
      options.delaySeconds ?? 0,
      options.countAttempt ?? false,
      withJobs,
    ],
  });
}

export interface ReleaseManyResult {
  /** Ids of the jobs handed back. */
  released: string[];
  /** Ids whose token no longer owned the job; those jobs were not changed. */
  stale: string[];
}

/** Hands many jobs back in one statement (a drain letting go of what it claimed but will not run). */
export async function releaseMany(
  db: Queryable,
  leases: readonly Lease[],
  options: ReleaseOptions = {},
): Promise<ReleaseManyResult> {
  if (leases.length === 0) return { released: [], stale: [] };
  const released = new Set((await runReleases(db, leases, options, false)).map((row) => row.id));
  return {
    released: leases.filter((lease) => released.has(lease.id)).map((lease) => lease.id),
    stale: leases.filter((lease) => !released.has(lease.id)).map((lease) => lease.id),
  };
}

/** Hands one job back and returns it; throws StaleLeaseError if its token no longer owns it. */
export async function release(db: Queryable, lease: Lease, options: ReleaseOptions = {}): Promise<Job> {
  const [row] = await runReleases(db, [lease], options, true);
  if (!row) throw new StaleLeaseError([lease.id]);
  return toJob(row.job!);
}
