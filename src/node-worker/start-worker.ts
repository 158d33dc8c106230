import { hostname } from 'node:os';
import { pgDb } from '../db/pg.js';
import { prepareClaims, releaseWorker, type Tracing } from '../engine/index.js';
import { drainWorkerId } from '../engine/internal.js';
import type { JobDefinition, Logger, PeriodicJob, QueueDeliveries } from '../drain/index.js';
import {
  CLAIMS_AHEAD_AT_ONCE,
  createRegistry,
  jsonConsoleLogger,
  readSettings,
  runUntilStopped,
  SHARED_SETTINGS,
  type RunningDrain,
} from '../drain/internal.js';
import { NODE_WORKER_SETTINGS } from './settings.js';
import { JobWakeups } from './wakeups.js';

/**
 * The worker's options. Those that are settings (all but the handlers,
 * schedules, housekeeping interval, deliveries, tracing and logger) are checked, and
 * defaulted, as their variables are: docs/configuration.md.
 */
export interface WorkerOptions {
  databaseUrl: string;
  /** The job types this worker runs; it claims no others. */
  handlers: readonly JobDefinition[];
  schedules?: readonly PeriodicJob[];
  /** Jobs running at once (WORKER_CONCURRENCY). */
  concurrency?: number;
  /**
   * The jobs the worker claims at a time (WORKER_CLAIM_BATCH_SIZE); default the concurrency. Larger
   * claims ahead, in two claims of half a batch out at once, for many short
   * jobs; `auto` sizes the batch from the claims' round trip and the jobs'
   * run time (see JobLoopOptions.claimBatchSize).
   */
  claimBatchSize?: number | 'auto';
  /**
   * Recorded on every claim. Give a stable one (per host or pod) and a
   * restarted worker hands back the leases its previous run held at once,
   * instead of waiting for them to expire (WORKER_ID). Default: host, pid and a random part.
   */
  workerId?: string;
  /** An idle worker looks for jobs at least this often (POLL_INTERVAL_MS). */
  pollIntervalMs?: number;
  /** LISTEN for enqueues to start jobs at once (WORKER_LISTEN); false behind a transaction pooler. */
  listen?: boolean;
  /**
   * Prepare the engine's statements once per connection
   * (WORKER_PREPARED_STATEMENTS); false behind a pooler that loses them
   * between transactions (PgBouncer before 1.21, or without
   * max_prepared_statements, in transaction mode).
   */
  preparedStatements?: boolean;
  /**
   * Reaping, expiry, periodic jobs and pruning run this often. Default 5000
   * ms; 0 turns them off (in a large fleet a few workers, or the cron drain, suffice).
   */
  housekeepingIntervalMs?: number;
  /** How long finished jobs are kept (RETENTION_SECONDS). */
  retentionSeconds?: number;
  /** How many days the daily attempt statistics are kept (STATS_RETENTION_DAYS). */
  statsRetentionDays?: number;
  /** On stop, running jobs get this long to finish before they are handed back (SHUTDOWN_GRACE_SECONDS, here in ms). */
  shutdownGraceMs?: number;
  /**
   * Delivers the jobs of queues whose delivery target is a webhook (set with
   * `PUT /v1/queues/{queue}`); without it the worker leaves those queues alone.
   * `skiplock work` gives one that reads the secrets from its environment.
   */
  deliveries?: QueueDeliveries;
  /**
   * Runs each attempt in a span of the trace its job was enqueued in,
   * through the OpenTelemetry SDK the process runs: `openTelemetry(api)`
   * (docs/operations.md#tracing). No spans when left out.
   */
  tracing?: Tracing;
  logger?: Logger;
}

export interface RunningWorker {
  readonly workerId: string;
  /** Claims nothing more, lets running jobs finish within the grace period, hands back the rest, closes everything. */
  stop(): Promise<void>;
  /** Settles once the worker has stopped and closed its connections. */
  readonly done: Promise<void>;
}

/**
 * A Node process that drains continuously: the same job loop as a Worker's
 * drain, over the `pg` driver, with no time budget. It waits for work on
 * LISTEN/NOTIFY (and polling), and runs the housekeeping on a timer.
 */
export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const { concurrency, claimBatchSize, pollIntervalMs, listen, preparedStatements, shutdownGraceMs } = readSettings(
    NODE_WORKER_SETTINGS,
    {},
    options,
  );
  const { retentionSeconds, statsRetentionDays } = readSettings(SHARED_SETTINGS, {}, options);
  const logger = options.logger ?? jsonConsoleLogger;
  const workerId = options.workerId ?? drainWorkerId(`node-${hostname()}-${process.pid}`);
  const registry = createRegistry(options.handlers, options.schedules);
  // At most one connection per running attempt (heartbeats, progress), and one
  // for completions. A connection plans each statement the first time it runs
  // it, so the pool keeps them for a minute idle (node-postgres closes them
  // after 10 s), and the claims (two when claiming ahead) and the
  // housekeeping have their own, kept while the worker runs; LISTEN holds
  // one more of its own.
  const db = pgDb(options.databaseUrl, { max: concurrency + 1, idleTimeoutMs: 60_000, preparedStatements });
  const keptConnections = (max: number) => pgDb(options.databaseUrl, { max, idleTimeoutMs: 0, preparedStatements });
  const claimsDb = keptConnections(CLAIMS_AHEAD_AT_ONCE);
  const housekeepingDb = keptConnections(1);
  const closeAll = () => Promise.all([db, claimsDb, housekeepingDb].map((each) => each.close()));
  let wakeups: JobWakeups | undefined;
  let drain: RunningDrain;
  try {
    if (options.workerId !== undefined) await releaseWorker(db, workerId);
    // Both claim connections opened and planned now (two statements at once take one each), not on their first job.
    await Promise.all(Array.from({ length: CLAIMS_AHEAD_AT_ONCE }, () => prepareClaims(claimsDb)));
    const started = await JobWakeups.start({ databaseUrl: options.databaseUrl, pollIntervalMs, listen, logger });
    wakeups = started;
    drain = await runUntilStopped(db, registry, {
      workerId,
      concurrency,
      claimBatchSize,
      waitForWork: (signal) => started.next(signal),
      notificationsReceived: () => started.notificationsReceived,
      ...(options.housekeepingIntervalMs === undefined
        ? {}
        : { housekeepingIntervalMs: options.housekeepingIntervalMs }),
      retentionSeconds,
      statsRetentionDays,
      ...(options.deliveries === undefined ? {} : { deliveries: options.deliveries }),
      tracing: options.tracing,
      logger,
      housekeepingDb,
      claimsDb,
    });
  } catch (error) {
    await wakeups?.close();
    await closeAll();
    throw error;
  }
  const done = drain.done.finally(async () => {
    await wakeups.close();
    await closeAll();
  });
  return {
    workerId,
    stop: () => {
      void drain.stop(shutdownGraceMs);
      return done;
    },
    done,
  };
}
