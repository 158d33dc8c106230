import { MAX_CLAIM } from '../engine/index.js';
import {
  AUTO_BATCH_MAX_SLOTS,
  number,
  onOff,
  secondsAsMilliseconds,
  setting,
  text,
  wholeNumber,
  wholeNumberOr,
} from '../drain/internal.js';

/**
 * The settings only the Node worker reads, beside SHARED_SETTINGS: options
 * of `startWorker` (defaults included), and variables of `skiplock work`.
 */
export const NODE_WORKER_SETTINGS = {
  concurrency: setting({
    variable: 'WORKER_CONCURRENCY',
    kind: wholeNumber({ min: 1, max: 1000 }),
    default: 10,
    description: 'jobs running at once; the worker opens up to this many connections plus a few',
  }),
  claimBatchSize: setting({
    variable: 'WORKER_CLAIM_BATCH_SIZE',
    kind: wholeNumberOr('auto', { min: 1, max: MAX_CLAIM }),
    defaultFrom: { shown: '`WORKER_CONCURRENCY`', of: (values) => values.concurrency as number },
    description: `the jobs a worker claims at a time; larger claims ahead for many short jobs: the batch is claimed in two halves, two claims out at once while the queue has a backlog, and a worker holds up to one and a half batches; \`auto\` sizes it as it runs, from the claims' round trip and the jobs' run time, up to ${AUTO_BATCH_MAX_SLOTS} times \`WORKER_CONCURRENCY\``,
  }),
  workerId: setting({
    variable: 'WORKER_ID',
    kind: text('a name'),
    unset: '`skiplock:node-<host>-<pid>-<random>`',
    description:
      'recorded on every claim; a stable one (per host or pod) hands back, at start, the leases its previous run held',
  }),
  pollIntervalMs: setting({
    variable: 'POLL_INTERVAL_MS',
    kind: number({ min: 10 }),
    default: 1000,
    description: 'an idle worker looks for jobs at least this often, in milliseconds',
  }),
  listen: setting({
    variable: 'WORKER_LISTEN',
    kind: onOff(),
    default: true,
    description: 'LISTEN for enqueues, to start their jobs at once; `off` behind a transaction pooler',
  }),
  deliverWebhooks: setting({
    variable: 'WORKER_DELIVERIES',
    kind: onOff(),
    default: true,
    // startWorker takes a QueueDeliveries (`deliveries`) instead.
    option: false,
    description:
      'deliver the jobs of queues whose delivery target is a webhook (see [Delivery targets](handlers.md#a-queues-delivery-target)); `off` leaves them to other drains',
  }),
  preparedStatements: setting({
    variable: 'WORKER_PREPARED_STATEMENTS',
    kind: onOff(),
    default: true,
    description:
      "prepare the engine's statements once per connection; `off` behind a pooler that loses them between transactions (PgBouncer before 1.21, or without `max_prepared_statements`)",
  }),
  shutdownGraceMs: setting({
    variable: 'SHUTDOWN_GRACE_SECONDS',
    kind: secondsAsMilliseconds({ min: 0 }),
    default: 20_000,
    description:
      'on SIGTERM or SIGINT (`stop()`), how long running jobs may finish before they are handed back, in seconds (`shutdownGraceMs` in milliseconds)',
  }),
};
