import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import { getJob } from './read-jobs.js';
import { FINAL_STATUSES, type Job } from './types.js';

export type CancelOutcome =
  /** It was waiting: it is cancelled now and will never run. */
  | 'cancelled'
  /** It is running: its handler sees the request at its next heartbeat. */
  | 'cancel_requested'
  /** It had already finished; nothing changed. */
  | 'already_finished';

export interface CancelResult {
  job: Job;
  outcome: CancelOutcome;
}

const cancelSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT id, state FROM skiplock.jobs
  WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
  FOR UPDATE
),
requested AS (
  UPDATE skiplock.jobs j
  SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
  FROM target t
  WHERE j.id = t.id AND t.state = 'running'
  RETURNING j.id, j.attempts, 'cancel_requested' AS outcome, skiplock.job_json(j) AS job
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
  RETURNING finished_jobs.id, finished_jobs.attempts, 'cancelled' AS outcome, skiplock.job_json(finished_jobs) AS job
),
changed AS (
  SELECT * FROM requested UNION ALL SELECT * FROM finished
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, outcome, attempts FROM changed
)
SELECT job, outcome FROM changed
UNION ALL
SELECT skiplock.job_json(f), 'already_finished' FROM skiplock.finished_jobs f
WHERE f.id = $1 AND ($2::text IS NULL OR f.tenant = $2)`;

/**
 * Cancels a job. `tenant` scopes the lookup for a tenant-bound caller: another
 * tenant's job is reported as not found (undefined).
 */
export async function cancel(
  db: Queryable,
  id: string,
  scope: { tenant?: string } = {},
): Promise<CancelResult | undefined> {
  const [row] = await db.query<CancelResult>({
    name: 'skiplock_cancel',
    text: cancelSql,
    params: [id, scope.tenant ?? null],
  });
  if (row !== undefined) return { job: toJob(row.job), outcome: row.outcome };
  // A job that finished while this statement waited for its row lock is in
  // the history, which this statement's snapshot predates; a new one sees it.
  const job = await getJob(db, id, scope);
  return job && FINAL_STATUSES.includes(job.status) ? { job, outcome: 'already_finished' } : undefined;
}
