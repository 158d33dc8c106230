import { hostname } from 'node:os';
import { pgDb } from '../db/pg.js';
import { drainWorkerId, prepareClaims, releaseWorker } from '../engine/index.js';
import {
  CLAIMS_AHEAD_AT_ONCE,
  createRegistry,
  jsonConsoleLogger,
  runUntilStopped,
  type JobDefinition,
  type Logger,
  type PeriodicJob,
  type QueueDeliveries,
  type RunningDrain,
} from '../drain/index.js';
import { JobWakeups } from './wakeups.js';

export interface WorkerOptions {
  databaseUrl: string;
  /** The job types this worker runs; it claims no others. */
  handlers: readonly JobDefinition[];
  schedules?: readonly PeriodicJob[];
  /** Jobs running at once. Default 10. */
  concurrency?: number;
  /**
   * The jobs the worker claims at a time; default the free slots. Larger
   * claims ahead, in two claims of half a batch out at once, for many short
   * jobs (see JobLoopOptions.claimBatchSize).
   */
  claimBatchSize?: number;
  /**
   * Recorded on every claim. Give a stable one (per host or pod) and a
   * restarted worker hands back the leases its previous run held at once,
   * instead of waiting for them to expire. Default: host, pid and a random part.
   */
  workerId?: string;
  /** An idle worker looks for jobs at least this often. Default 1000 ms. */
  pollIntervalMs?: number;
  /** LISTEN for enqueues to start jobs at once. Default true; false behind a transaction pooler. */
  listen?: boolean;
  /**
   * Prepare the engine's statements once per connection. Default true;
   * false behind a pooler that loses them between transactions (PgBouncer
   * before 1.21, or without max_prepared_statements, in transaction mode).
   */
  preparedStatements?: boolean;
  /**
   * Reaping, expiry, periodic jobs and pruning run this often. Default 5000
   * ms; 0 turns them off (in a large fleet a few workers, or the cron drain, suffice).
   */
  housekeepingIntervalMs?: number;
  /** Default 7 days. */
  retentionSeconds?: number;
  /** How many days the daily attempt statistics are kept. Default 365. */
  statsRetentionDays?: number;
  /** On stop, running jobs get this long to finish before they are handed back. Default 20,000 ms. */
  shutdownGraceMs?: number;
  /**
   * Delivers the jobs of queues whose delivery target is a webhook (set with
   * `PUT /v1/queues/{queue}`); without it the worker leaves those queues alone.
   * `skiplock work` gives one that reads the secrets from its environment.
   */
  deliveries?: QueueDeliveries;
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
  const concurrency = options.concurrency ?? 10;
  const logger = options.logger ?? jsonConsoleLogger;
  const workerId = options.workerId ?? drainWorkerId(`node-${hostname()}-${process.pid}`);
  const registry = createRegistry(options.handlers, options.schedules);
  const preparedStatements = options.preparedStatements ?? true;
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
    const pollIntervalMs = options.pollIntervalMs ?? 1000;
    const started = await JobWakeups.start({ databaseUrl: options.databaseUrl, pollIntervalMs, listen: options.listen ?? true, logger });
    wakeups = started;
    drain = await runUntilStopped(db, registry, {
      workerId,
      concurrency,
      ...(options.claimBatchSize === undefined ? {} : { claimBatchSize: options.claimBatchSize }),
      waitForWork: (signal) => started.next(signal),
      ...(options.housekeepingIntervalMs === undefined ? {} : { housekeepingIntervalMs: options.housekeepingIntervalMs }),
      ...(options.retentionSeconds === undefined ? {} : { retentionSeconds: options.retentionSeconds }),
      ...(options.statsRetentionDays === undefined ? {} : { statsRetentionDays: options.statsRetentionDays }),
      ...(options.deliveries === undefined ? {} : { deliveries: options.deliveries }),
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
      void drain.stop(options.shutdownGraceMs ?? 20_000);
      return done;
    },
    done,
  };
}
