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
  /** Of `count`, the jobs held for their key's turn. */
  held: number;
  /** The held jobs by why they wait. */
  heldBy: HeldCounts;
  /**
   * Of `count`, the jobs waiting out a debounce period (not started, their start ahead; a held
   * one is in `held` too).
   */
  debounced: number;
}

/**
 * Held jobs by reason: their concurrency key has no free slot, they are
 * behind their ordering key's earlier jobs, their key is held by a failed
 * head, or their rate key's window is full.
 */
export interface HeldCounts {
  concurrency: number;
  order: number;
  failedHead: number;
  rate: number;
}

/**
 * Counts per queue, tenant and status: what is waiting and running now (the
 * queue table) and what finished in the last hour (the history's newest
 * days, found through its BRIN index on finished_at).
 */
const queueStatsSql = /* sql */ `WITH live AS (
  SELECT j.queue, j.tenant, skiplock.job_status(j.state, j.run_at) AS status, count(*)::integer AS count,
         CASE WHEN skiplock.job_status(j.state, j.run_at) = 'queued'
              THEN extract(epoch FROM now() - min(j.run_at))::float8 END AS "oldestWaitSeconds",
         count(*) FILTER (WHERE j.state = 'held')::integer AS held
  FROM skiplock.jobs j
  GROUP BY 1, 2, 3
),
held AS (
  SELECT j.queue, j.tenant, skiplock.job_status(j.state, j.run_at) AS status,
         count(*) FILTER (WHERE c.blocked_by IS NULL AND NOT c.ordered AND c.rate_limit IS NULL)::integer AS concurrency,
         count(*) FILTER (WHERE c.blocked_by IS NULL AND c.ordered)::integer AS "order",
         count(*) FILTER (WHERE c.blocked_by IS NOT NULL)::integer AS "failedHead",
         count(*) FILTER (WHERE c.rate_limit IS NOT NULL)::integer AS rate
  FROM skiplock.jobs j
  JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
  JOIN skiplock.concurrency_keys c ON c.tenant = kj.tenant AND c.key = kj.key
  WHERE j.state = 'held'
  GROUP BY 1, 2, 3
),
-- Through the debounce keys' partial index: as many rows as keys debounce now, not the waiting jobs.
debounced AS (
  SELECT j.queue, j.tenant, skiplock.job_status(j.state, j.run_at) AS status, count(*)::integer AS debounced
  FROM skiplock.dedup_keys k JOIN skiplock.jobs j ON j.id = k.job_id
  WHERE k.debounce AND j.first_started_at IS NULL AND j.run_at > now() AND j.state IN ('scheduled', 'queued', 'held')
  GROUP BY 1, 2, 3
)
SELECT l.*, json_build_object('concurrency', coalesce(h.concurrency, 0), 'order', coalesce(h."order", 0),
                              'failedHead', coalesce(h."failedHead", 0), 'rate', coalesce(h.rate, 0)) AS "heldBy",
       coalesce(d.debounced, 0) AS debounced
FROM live l
LEFT JOIN held h ON h.queue = l.queue AND h.tenant = l.tenant AND h.status = l.status
LEFT JOIN debounced d ON d.queue = l.queue AND d.tenant = l.tenant AND d.status = l.status
UNION ALL
SELECT queue, tenant, state, count(*)::integer, NULL, 0,
       json_build_object('concurrency', 0, 'order', 0, 'failedHead', 0, 'rate', 0), 0
FROM skiplock.finished_jobs
WHERE finished_at > now() - interval '1 hour'
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`;

export async function queueStats(db: Queryable): Promise<QueueStatsRow[]> {
  return db.query<QueueStatsRow>({ name: 'skiplock_queue_stats', text: queueStatsSql, params: [] });
}
