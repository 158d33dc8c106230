import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import type { Job } from './types.js';

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

const cancelSql = /* sql */ `
WITH target AS (
  SELECT id, state FROM skiplock.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
),
cancelled AS (
  UPDATE skiplock.jobs j
  SET state = CASE WHEN j.state = 'running' THEN 'running' ELSE 'cancelled' END,
      cancel_requested_at = CASE WHEN j.state = 'running' THEN coalesce(j.cancel_requested_at, now()) END
  FROM target
  WHERE j.id = target.id AND j.state IN ('scheduled', 'queued', 'retrying', 'running')
  RETURNING j.id, j.attempts, j.state, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt)
  SELECT id, CASE state WHEN 'running' THEN 'cancel_requested' ELSE 'cancelled' END, attempts FROM cancelled
)
SELECT coalesce(c.job, skiplock.job_json(j)) AS job,
       CASE WHEN c.id IS NULL THEN 'already_finished'
            WHEN c.state = 'running' THEN 'cancel_requested' ELSE 'cancelled' END AS outcome
FROM target
JOIN skiplock.jobs j ON j.id = target.id
LEFT JOIN cancelled c ON c.id = target.id`;

/**
 * Cancels a job. `tenant` scopes the lookup for a tenant-bound caller: another
 * tenant's job is reported as not found (undefined).
 */
export async function cancel(db: Queryable, id: string, scope: { tenant?: string } = {}): Promise<CancelResult | undefined> {
  const [row] = await db.query<CancelResult>({
    name: 'skiplock_cancel',
    text: cancelSql,
    params: [id, scope.tenant ?? null],
  });
  return row && { job: toJob(row.job), outcome: row.outcome };
}
