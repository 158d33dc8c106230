import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import { getJob } from './read-jobs.js';
import type { Job } from './types.js';

export interface RescheduleChange {
  /** The new priority, -1000 to 1000. */
  priority?: number;
  /** The new time the job may start at: a past time means now. */
  runAt?: Date | string;
  /** Or: start no sooner than this many seconds from now. */
  delaySeconds?: number;
}

export type RescheduleOutcome =
  /** It was waiting: it waits with the new priority and time. */
  | 'rescheduled'
  /** It is running or has finished: only a waiting job can be changed. Nothing changed. */
  | 'not_waiting'
  /** The new time is past the job's expiresAt, so it could never start. Nothing changed. */
  | 'after_expiry';

export interface RescheduleResult {
  job: Job;
  outcome: RescheduleOutcome;
}

/**
 * Changes the priority or start time of a waiting job, under its row lock so
 * a claim cannot take it halfway. A job moved to the future waits as
 * scheduled, one moved to now as queued; a job waiting for a retry stays
 * retrying. The change is recorded as a `rescheduled` event with what it was.
 */
const rescheduleSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT id, state, priority, run_at, expires_at,
         coalesce($3::smallint, priority) AS new_priority,
         coalesce(greatest(coalesce($4::timestamptz, now() + make_interval(secs => $5::float8)), now()), run_at)
           AS new_run_at
  FROM skiplock.jobs
  WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
  FOR UPDATE
),
changed AS (
  UPDATE skiplock.jobs j
  SET priority = t.new_priority,
      run_at = t.new_run_at,
      state = CASE WHEN ($4::timestamptz IS NULL AND $5::float8 IS NULL) OR j.state = 'retrying' THEN j.state
                   WHEN t.new_run_at > now() THEN 'scheduled' ELSE 'queued' END
  FROM target t
  WHERE j.id = t.id AND t.state <> 'running' AND (t.expires_at IS NULL OR t.new_run_at < t.expires_at)
  RETURNING j.id, j.attempts, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT c.id, 'rescheduled', c.attempts,
         jsonb_build_object('from', jsonb_build_object('priority', t.priority, 'runAt', skiplock.iso(t.run_at)),
                            'to', jsonb_build_object('priority', t.new_priority, 'runAt', skiplock.iso(t.new_run_at)))
  FROM changed c JOIN target t USING (id)
)
SELECT job, 'rescheduled' AS outcome FROM changed
UNION ALL
SELECT skiplock.job_json(j), CASE WHEN t.state = 'running' THEN 'not_waiting' ELSE 'after_expiry' END
FROM target t JOIN skiplock.jobs j USING (id)
WHERE NOT EXISTS (SELECT 1 FROM changed)`;

/**
 * Changes when and in what order a waiting job runs. `tenant` scopes the
 * lookup for a tenant-bound caller: another tenant's job is not found
 * (undefined).
 */
export async function reschedule(
  db: Queryable,
  id: string,
  change: RescheduleChange,
  scope: { tenant?: string } = {},
): Promise<RescheduleResult | undefined> {
  if (change.runAt !== undefined && change.delaySeconds !== undefined) {
    throw new TypeError('reschedule: give runAt or delaySeconds, not both');
  }
  const runAt = change.runAt instanceof Date ? change.runAt.toISOString() : change.runAt;
  const [row] = await db.query<RescheduleResult>({
    name: 'skiplock_reschedule',
    text: rescheduleSql,
    params: [id, scope.tenant ?? null, change.priority ?? null, runAt ?? null, change.delaySeconds ?? null],
  });
  if (row !== undefined) return { job: toJob(row.job), outcome: row.outcome };
  // Not live: finished (in the history), or not there at all.
  const job = await getJob(db, id, { tenant: scope.tenant });
  return job && { job, outcome: 'not_waiting' };
}
