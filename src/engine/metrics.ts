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
  /** Attempts the claims started, since migration 0015 (the job counts' ledger keeps them). */
  started: number;
  /**
   * The attempts that ended, by how, over the retained statistics
   * (STATS_RETENTION_DAYS): succeeded; failed and retried; failed for good;
   * cancelled while running; cut off by a lapsed lease.
   */
  succeeded: number;
  retried: number;
  failed: number;
  cancelled: number;
  leaseExpired: number;
  /** Jobs whose expires_at passed before they started, over the same days. */
  expired: number;
  /** From the attempt's run_at to its start (attempts that succeeded, failed or were cancelled). */
  waitSeconds: MetricHistogram;
  /** From the attempt's start to its end. */
  runSeconds: MetricHistogram;
  /** The queue's delivery target (`webhook`, `cloudflare-queue`); null without one, and for a tenant-bound scope. */
  deliveryTarget: string | null;
}

/** What `GET /metrics` exposes. */
export interface Metrics {
  /** Per queue and tenant (a tenant-bound scope: its own tenant's). */
  queues: QueueMetrics[];
  /**
   * Every attempt that ended before this is in the daily statistics: the
   * housekeeping rolls them up an hour at a time, so more than about two
   * hours behind means no housekeeping runs. Undefined for a tenant-bound
   * scope (a deployment's figure) and when no queue has figures.
   */
  statsRolledThrough?: Date;
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
 * One round trip per scrape: skiplock.queue_metrics (migrations/0015)
 * reads the live counts and the attempts started from the ledger the jobs'
 * triggers keep, the oldest ready job through a few index probes per
 * queue, and the attempt statistics, so its cost does not grow with the
 * jobs waiting.
 */
const queueMetricsSql = /* sql */ `
SELECT queue, tenant, waiting::float8 AS waiting, running::float8 AS running, parked::float8 AS parked,
       held::float8 AS held, oldest_waiting_seconds AS "oldestWaitingSeconds", started::float8 AS started,
       succeeded::float8 AS succeeded, retried::float8 AS retried, failed::float8 AS failed,
       cancelled::float8 AS cancelled, lease_expired::float8 AS "leaseExpired", expired::float8 AS expired,
       wait_ms_histogram AS "waitMs", run_ms_histogram AS "runMs",
       delivery_target AS "deliveryTarget", stats_rolled_through AS "statsRolledThrough"
FROM skiplock.queue_metrics($1::text)`;

interface QueueMetricsRecord extends Omit<QueueMetrics, 'waitSeconds' | 'runSeconds'> {
  waitMs: StoredHistogram;
  runMs: StoredHistogram;
  statsRolledThrough: Date | string | null;
}

/** Per queue and tenant (a tenant-bound scope: its own tenant's), what `GET /metrics` exposes. */
export async function queueMetrics(db: Queryable, scope: TenantScope = {}): Promise<Metrics> {
  const records = await db.query<QueueMetricsRecord>({
    name: 'skiplock_queue_metrics',
    text: queueMetricsSql,
    params: [scope.tenant ?? null],
  });
  const rolledThrough = records[0]?.statsRolledThrough;
  return {
    // statsRolledThrough is the same on every row: kept once, above.
    queues: records.map(({ waitMs, runMs, statsRolledThrough, ...row }) => ({
      ...row,
      waitSeconds: prometheusHistogram(waitMs),
      runSeconds: prometheusHistogram(runMs),
    })),
    ...(rolledThrough == null ? {} : { statsRolledThrough: new Date(rolledThrough) }),
  };
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
