import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import type { Json, Lease } from './types.js';

export interface ExtendLeaseOptions {
  /** New lease length from now; the job's own leaseSeconds when left out. */
  leaseSeconds?: number;
  /** Saved with the heartbeat, so a job that outlives its invocation can resume. */
  progress?: Json;
}

export interface ExtendedLease {
  leaseExpiresAt: string;
  /** The job was cancelled while running: the handler should stop. */
  cancelRequested: boolean;
}

/**
 * Heartbeat. Works while the token still owns the job, even just after the
 * lease ran out, as long as no reaper or other claim has taken it back.
 */
const extendLeaseSql = /* sql */ `
WITH extended AS (
  UPDATE skiplock.jobs
  SET lease_expires_at = now() + make_interval(secs => coalesce($3::integer, lease_seconds)),
      progress = CASE WHEN $4::boolean THEN $5::jsonb ELSE progress END
  -- The token matches only while the job runs (jobs_lease_while_running).
  WHERE id = $1 AND lease_token = $2
  RETURNING id, attempts, worker_id, lease_expires_at, cancel_requested_at
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  SELECT id, 'lease_extended', attempts, worker_id,
         jsonb_build_object('leaseExpiresAt', skiplock.iso(lease_expires_at))
  FROM extended
)
SELECT skiplock.iso(lease_expires_at) AS "leaseExpiresAt",
       cancel_requested_at IS NOT NULL AS "cancelRequested"
FROM extended`;

export async function extendLease(
  db: Queryable,
  lease: Lease,
  options: ExtendLeaseOptions = {},
): Promise<ExtendedLease> {
  const [row] = await db.query<ExtendedLease>({
    name: 'skiplock_extend_lease',
    text: extendLeaseSql,
    params: [
      lease.id,
      lease.leaseToken,
      options.leaseSeconds ?? null,
      options.progress !== undefined,
      options.progress === undefined ? null : JSON.stringify(options.progress),
    ],
  });
  if (!row) throw new StaleLeaseError([lease.id]);
  return { leaseExpiresAt: row.leaseExpiresAt, cancelRequested: row.cancelRequested };
}
