import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import type { Job } from './types.js';

export interface RetryResult {
  job: Job;
  /** False when the job was not failed, cancelled or expired; nothing changed then. */
  retried: boolean;
}

/** Runs a failed, cancelled or expired job again, with a fresh set of attempts (and, if it has a key, its turn again). */
const retrySql = /* sql */ `WITH gone AS (
  DELETE FROM skiplock.finished_jobs f
  WHERE f.id = $1 AND ($2::text IS NULL OR f.tenant = $2) AND f.state IN ('failed', 'cancelled', 'expired')
  RETURNING f
),
back AS (
  INSERT INTO skiplock.jobs AS j
  SELECT r.* FROM gone, LATERAL skiplock.requeued_job(gone.f, (gone.f).queue) r
  RETURNING j.id, j AS live
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, 'retried', 0 FROM back
),
-- A keyed job takes its key's turn again: settled, as any insert's keyed
-- jobs are, by the jobs table's insert trigger at the end of this statement.
rekeyed AS (
  UPDATE skiplock.keyed_jobs k SET slot = NULL FROM back WHERE k.job_id = back.id
)
-- Its tags from the finished row: requeued_job writes them in this statement, which cannot read them back.
SELECT skiplock.job_json(back.live, (gone.f).tags) AS job, true AS retried FROM back, gone
UNION ALL
SELECT skiplock.job_json(a), false FROM skiplock.all_jobs a
WHERE a.id = $1 AND ($2::text IS NULL OR a.tenant = $2) AND NOT EXISTS (SELECT 1 FROM back)`;

export async function retry(
  db: Queryable,
  id: string,
  scope: { tenant?: string } = {},
): Promise<RetryResult | undefined> {
  const [row] = await db.query<RetryResult>({
    name: 'skiplock_retry',
    text: retrySql,
    params: [id, scope.tenant ?? null],
  });
  return row && { job: toJob(row.job), retried: row.retried };
}
