import type { Queryable } from '../db/types.js';
import type { TenantScope } from './read-jobs.js';

/**
 * The upper bounds (seconds) of the Prometheus buckets, 1 ms to about 3
 * days, four times apart: every eighth bucket of the statistics' log-scale
 * histograms (four to a doubling), so each is exact against them.
 */
export const METRIC_BUCKET_BOUNDS_SECONDS: readonly number[] = Array.from({ length: 15 }, (_, k) => 4 ** k / 1000);

/** A duration histogram in Prometheus's shape. */
export interface MetricHistogram {
  /** Cumulative counts, one per bound of METRIC_BUCKET_BOUNDS_SECONDS (`le`). */
  buckets: number[];
  /** Every observation (`le="+Inf"`, `_count`). */
  count: number;
  /** Seconds in all: an estimate, each observation taken at its bucket's geometric middle (within 9%). */
  sum: number;
}

/** What a scrape reports for one queue and tenant. */
export interface QueueMetrics {
  queue: string;
  tenant: string;
  /** Jobs scheduled, queued or retrying now. */
  waiting: number;
  running: number;
  /** Durable steps' jobs asleep or waiting for an event or their children. */
  parked: number;
  /** Jobs waiting for their concurrency, ordering or rate key. */
  held: number;
  /** Seconds the oldest ready waiting job has waited; 0 with none. */
  oldestWaitingSeconds: number;
  /** Attempts that ended succeeding, over the retained statistics (STATS_RETENTION_DAYS). */
  succeeded: number;
  /** Attempts that ended failing (retried or not, cancelled while running), over the same days. */
  failed: number;
  /** From the attempt's run_at to its start. */
  waitSeconds: MetricHistogram;
  /** From the attempt's start to its end. */
  runSeconds: MetricHistogram;
}

/** A statistics histogram as stored: bucket number (0: 0 ms; b: [2^((b-1)/4), 2^(b/4)) ms) to count. */
type StoredHistogram = Record<string, number | string>;

/** Folds a stored log-scale histogram into Prometheus's cumulative buckets. */
export function prometheusHistogram(stored: StoredHistogram): MetricHistogram {
  const buckets = METRIC_BUCKET_BOUNDS_SECONDS.map(() => 0);
  let count = 0;
  let sumMs = 0;
  for (const [key, value] of Object.entries(stored)) {
    const bucket = Number(key);
    const n = Number(value);
    count += n;
    sumMs += bucket === 0 ? 0 : n * 2 ** ((bucket - 0.5) / 4);
    // Bucket b lies under 2^(b/4) ms = 4^(b/8) ms: under the bound of index ceil(b/8).
    for (let index = Math.ceil(bucket / 8); index < buckets.length; index++) buckets[index]! += n;
  }
  return { buckets, count, sum: sumMs / 1000 };
}

/**
 * One round trip per scrape: skiplock.queue_metrics (migrations/0009)
 * reads the live counts from the ledger the jobs' triggers keep, the oldest
 * ready job through a few index probes per queue, and the attempt
 * statistics, so its cost does not grow with the jobs waiting.
 */
const queueMetricsSql = /* sql */ `
SELECT queue, tenant, waiting::float8 AS waiting, running::float8 AS running, parked::float8 AS parked,
       held::float8 AS held, oldest_waiting_seconds AS "oldestWaitingSeconds",
       succeeded::float8 AS succeeded, failed::float8 AS failed,
       wait_ms_histogram AS "waitMs", run_ms_histogram AS "runMs"
FROM skiplock.queue_metrics($1::text)`;

interface QueueMetricsRecord extends Omit<QueueMetrics, 'waitSeconds' | 'runSeconds'> {
  waitMs: StoredHistogram;
  runMs: StoredHistogram;
}

/** Per queue and tenant (a tenant-bound scope: its own tenant's), what `GET /metrics` exposes. */
export async function queueMetrics(db: Queryable, scope: TenantScope = {}): Promise<QueueMetrics[]> {
  const records = await db.query<QueueMetricsRecord>({
    name: 'skiplock_queue_metrics',
    text: queueMetricsSql,
    params: [scope.tenant ?? null],
  });
  return records.map(({ waitMs, runMs, ...row }) => ({
    ...row,
    waitSeconds: prometheusHistogram(waitMs),
    runSeconds: prometheusHistogram(runMs),
  }));
}

const compactJobCountsSql = /* sql */ `SELECT rows_before::integer AS "rowsBefore", rows_after::integer AS "rowsAfter"
FROM skiplock.compact_job_counts()`;

export interface JobCountsCompaction {
  rowsBefore: number;
  rowsAfter: number;
}

/**
 * Folds the job counts' ledger (a row per statement that changed jobs) into
 * a row per tenant, queue and state, so a scrape sums a few rows. Housekeeping
 * runs it every round.
 */
export async function compactJobCounts(db: Queryable): Promise<JobCountsCompaction> {
  const [row] = await db.query<JobCountsCompaction>({
    name: 'skiplock_compact_job_counts',
    text: compactJobCountsSql,
    params: [],
  });
  return row ?? { rowsBefore: 0, rowsAfter: 0 };
}
