import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import type { Job } from './types.js';

export interface RetryResult {
  job: Job;
  /** False when the job was not failed, cancelled or expired; nothing changed then. */
  retried: boolean;
}

/** Runs a failed, cancelled or expired job again, with a fresh set of attempts. */
const retrySql = /* sql */ `
WITH target AS (
  SELECT id FROM skiplock.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
),
retried AS (
  UPDATE skiplock.jobs j
  SET state = 'queued', run_at = now(), attempts = 0, cancel_requested_at = NULL,
      lease_token = NULL, lease_expires_at = NULL, worker_id = NULL, result = NULL, expires_at = NULL
  FROM target
  WHERE j.id = target.id AND j.state IN ('failed', 'cancelled', 'expired')
  RETURNING j.id, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, 'retried', 0 FROM retried
)
SELECT coalesce(r.job, skiplock.job_json(j)) AS job, r.id IS NOT NULL AS retried
FROM target JOIN skiplock.jobs j ON j.id = target.id LEFT JOIN retried r ON r.id = target.id`;

export async function retry(db: Queryable, id: string, scope: { tenant?: string } = {}): Promise<RetryResult | undefined> {
  const [row] = await db.query<RetryResult>({
    name: 'skiplock_retry',
    text: retrySql,
    params: [id, scope.tenant ?? null],
  });
  return row && { job: toJob(row.job), retried: row.retried };
}
