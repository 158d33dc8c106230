import {
  METRIC_BUCKET_BOUNDS_SECONDS,
  type MetricHistogram,
  type Metrics,
  type QueueMetrics,
} from '../engine/index.js';

/** The Prometheus text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** A label value as the format quotes it: backslash, double quote and line feed escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labels(pairs: Record<string, string>): string {
  const inner = Object.entries(pairs)
    .map(([name, value]) => `${name}="${escapeLabelValue(value)}"`)
    .join(',');
  return `{${inner}}`;
}

/** A number as the format writes it (Go's float syntax: +Inf, -Inf, NaN). */
function sample(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (!Number.isFinite(value)) return value > 0 ? '+Inf' : '-Inf';
  return String(value);
}

interface Family {
  name: string;
  type: 'gauge' | 'counter' | 'histogram';
  help: string;
  lines: (row: QueueMetrics, queueLabels: Record<string, string>) => string[];
}

function gauge(name: string, help: string, value: (row: QueueMetrics) => number): Family {
  return { name, type: 'gauge', help, lines: (row, l) => [`${name}${labels(l)} ${sample(value(row))}`] };
}

function histogramLines(name: string, histogram: MetricHistogram, queueLabels: Record<string, string>): string[] {
  const buckets = METRIC_BUCKET_BOUNDS_SECONDS.map(
    (bound, index) => `${name}_bucket${labels({ ...queueLabels, le: String(bound) })} ${histogram.buckets[index]}`,
  );
  return [
    ...buckets,
    `${name}_bucket${labels({ ...queueLabels, le: '+Inf' })} ${histogram.count}`,
    `${name}_sum${labels(queueLabels)} ${sample(histogram.sum)}`,
    `${name}_count${labels(queueLabels)} ${histogram.count}`,
  ];
}

/** The outcome label of skiplock_attempts_total, and its count. */
const ATTEMPT_OUTCOMES: [string, (row: QueueMetrics) => number][] = [
  ['succeeded', (row) => row.succeeded],
  ['retried', (row) => row.retried],
  ['failed', (row) => row.failed],
  ['cancelled', (row) => row.cancelled],
  ['lease_expired', (row) => row.leaseExpired],
];

const FAMILIES: Family[] = [
  gauge('skiplock_jobs_waiting', 'Jobs scheduled, queued or retrying.', (row) => row.waiting),
  gauge('skiplock_jobs_running', 'Jobs running (an attempt holds their lease).', (row) => row.running),
  gauge(
    'skiplock_jobs_parked',
    'Jobs parked by their durable steps (asleep, or waiting for an event or children).',
    (row) => row.parked,
  ),
  gauge('skiplock_jobs_held', 'Jobs held for their concurrency, ordering or rate key.', (row) => row.held),
  gauge(
    'skiplock_oldest_waiting_seconds',
    'Seconds the oldest ready waiting job has waited since its run_at; 0 when none is ready.',
    (row) => row.oldestWaitingSeconds,
  ),
  {
    name: 'skiplock_attempts_started_total',
    type: 'counter',
    help: 'Attempts the claims started (counted since migration 0015).',
    lines: (row, l) => [`skiplock_attempts_started_total${labels(l)} ${row.started}`],
  },
  {
    name: 'skiplock_attempts_total',
    type: 'counter',
    help:
      'Attempts that ended, by outcome (succeeded; retried: failed with a retry to come; failed: for good; ' +
      'cancelled while running; lease_expired: cut off by a lapsed lease), over the retained daily statistics ' +
      '(STATS_RETENTION_DAYS) and the hour not yet rolled up.',
    lines: (row, l) =>
      ATTEMPT_OUTCOMES.map(([outcome, count]) => `skiplock_attempts_total${labels({ ...l, outcome })} ${count(row)}`),
  },
  {
    name: 'skiplock_jobs_expired_total',
    type: 'counter',
    help: 'Jobs whose expires_at passed before they started, over the same days as skiplock_attempts_total.',
    lines: (row, l) => [`skiplock_jobs_expired_total${labels(l)} ${row.expired}`],
  },
  {
    name: 'skiplock_attempt_wait_seconds',
    type: 'histogram',
    help: "Seconds from an ended attempt's run_at to its start; _sum is estimated from the buckets (within 9%).",
    lines: (row, l) => histogramLines('skiplock_attempt_wait_seconds', row.waitSeconds, l),
  },
  {
    name: 'skiplock_attempt_run_seconds',
    type: 'histogram',
    help: "Seconds from an ended attempt's start to its end; _sum is estimated from the buckets (within 9%).",
    lines: (row, l) => histogramLines('skiplock_attempt_run_seconds', row.runSeconds, l),
  },
];

/** HELP text escapes backslash and line feed. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function header(name: string, type: Family['type'], help: string): string[] {
  return [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`];
}

/**
 * The exposition: each family's HELP and TYPE, then its series per queue
 * and tenant; then the deployment's series, when the metrics have them
 * (never for a tenant-bound key).
 */
export function prometheusText({ queues, statsRolledThrough }: Metrics): string {
  const out: string[] = [];
  for (const family of FAMILIES) {
    out.push(...header(family.name, family.type, family.help));
    for (const row of queues) out.push(...family.lines(row, { queue: row.queue, tenant: row.tenant }));
  }
  const delivering = queues.filter((row) => row.deliveryTarget !== null);
  if (delivering.length > 0) {
    const name = 'skiplock_queue_delivery_info';
    out.push(...header(name, 'gauge', "1 for each queue with a delivery target, labelled with the target's kind."));
    for (const row of delivering) {
      out.push(`${name}${labels({ queue: row.queue, tenant: row.tenant, target: row.deliveryTarget! })} 1`);
    }
  }
  if (statsRolledThrough !== undefined) {
    const name = 'skiplock_stats_rolled_through_timestamp_seconds';
    out.push(
      ...header(
        name,
        'gauge',
        'Every attempt that ended before this time (Unix seconds) is in the daily statistics; housekeeping rolls up an hour at a time.',
      ),
      `${name} ${statsRolledThrough.getTime() / 1000}`,
    );
  }
  return `${out.join('\n')}\n`;
}
