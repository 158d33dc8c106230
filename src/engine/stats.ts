import type { Queryable } from '../db/types.js';
import type { JobStatus } from './types.js';

export interface QueueStatsRow {
  queue: string;
  tenant: string;
  status: JobStatus;
  /** Jobs in this status now; for final statuses, jobs that finished in the last hour. */
  count: number;
  /** Seconds the oldest ready job has waited (queued only), else null. */
  oldestWaitSeconds: number | null;
  /** Of `count`, the jobs held for their concurrency or ordering key's turn. */
  held: number;
}

/**
 * Counts per queue, tenant and status: what is waiting and running now (the
 * queue table) and what finished in the last hour (the history's newest
 * days, found through its BRIN index on finished_at).
 */
const queueStatsSql = /* sql */ `SELECT queue, tenant, skiplock.job_status(state, run_at) AS status, count(*)::integer AS count,
       CASE WHEN skiplock.job_status(state, run_at) = 'queued'
            THEN extract(epoch FROM now() - min(run_at))::float8 END AS "oldestWaitSeconds",
       count(*) FILTER (WHERE state = 'held')::integer AS held
FROM skiplock.jobs
GROUP BY 1, 2, 3
UNION ALL
SELECT queue, tenant, state, count(*)::integer, NULL, 0
FROM skiplock.finished_jobs
WHERE finished_at > now() - interval '1 hour'
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`;

export async function queueStats(db: Queryable): Promise<QueueStatsRow[]> {
  return db.query<QueueStatsRow>({ name: 'skiplock_queue_stats', text: queueStatsSql, params: [] });
}
