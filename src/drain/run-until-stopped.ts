import type { Queryable } from '../db/types.js';
import { sleep } from '../engine/sleep.js';
import { DrainBudget } from './budget.js';
import { syncJobTypeRetentions } from './job-type-retentions.js';
import { runHousekeeping, type HousekeepingOptions } from './housekeeping.js';
import { runJobs } from './job-loop.js';
import { errorFields, jsonConsoleLogger, type Logger } from './logger.js';
import { syncPeriodicJobs } from './periodic.js';
import type { JobRegistry } from './registry.js';
import { SHARED_SETTINGS } from './settings.js';
import type { QueueDeliveries } from './bulk-delivery/queue-deliveries.js';
import type { Tracing } from '../engine/tracing.js';

export interface RunUntilStoppedOptions {
  workerId: string;
  /** Attempts running at once. */
  concurrency: number;
  /** The jobs the loop claims at a time; default the free slots (see JobLoopOptions.claimBatchSize). */
  claimBatchSize?: number | 'auto';
  /**
   * Resolves when there may be work: a notification, a poll interval, or
   * `signal` (the worker stopping). Called after a claim that found nothing.
   */
  waitForWork(signal: AbortSignal): Promise<void>;
  /** How many notifications of work have come so far (see JobLoopOptions.notificationsReceived). */
  notificationsReceived?: () => number;
  /** Reaping, expiry, periodic jobs and pruning run this often; 0 turns them off. Default 5000 ms. */
  housekeepingIntervalMs?: number;
  /** Keep finished jobs this long before pruning them. Default RETENTION_SECONDS's. */
  retentionSeconds?: number;
  /** Keep the daily attempt statistics this many days. Default STATS_RETENTION_DAYS's. */
  statsRetentionDays?: number;
  /** Delivers the jobs of queues with a delivery target it can reach (see QueueDeliveries); none when left out. */
  deliveries?: QueueDeliveries;
  /** Runs each attempt in a span of its job's trace (see `openTelemetry`); no spans when left out. */
  tracing?: Tracing | undefined;
  logger?: Logger;
  /**
   * A connection of its own for the housekeeping (default `db`). A round
   * holds a connection for several statements; on a shared pool the
   * statements meanwhile open another, new to them, and plan from scratch.
   */
  housekeepingDb?: Queryable;
  /** Connections of their own for the claims (see JobLoopOptions.claimsDb); default `db`. */
  claimsDb?: Queryable;
}

export interface RunningDrain {
  /** Claims nothing more; running jobs get `graceMs` to finish, then are handed back. Settles when all stopped. */
  stop(graceMs: number): Promise<void>;
  /** Settles once every job has finished or been handed back. */
  readonly done: Promise<void>;
}

/**
 * The drain for a process that runs until it is stopped (a Node worker, a
 * container): the same job loop as a Worker's bounded drain, with no time
 * budget, waking on `waitForWork`, and housekeeping on a timer beside it.
 * The caller owns the database and closes it after `done`.
 */
export async function runUntilStopped(
  db: Queryable,
  registry: JobRegistry,
  options: RunUntilStoppedOptions,
): Promise<RunningDrain> {
  const logger = options.logger ?? jsonConsoleLogger;
  await syncPeriodicJobs(db, registry);
  await syncJobTypeRetentions(db, registry);
  const budget = new DrainBudget(Number.POSITIVE_INFINITY);
  const jobs = runJobs(db, registry, {
    workerId: options.workerId,
    concurrency: options.concurrency,
    claimBatchSize: options.claimBatchSize ?? options.concurrency,
    budget,
    logger,
    handBackDelaySeconds: 1,
    waitForWork: options.waitForWork,
    ...(options.notificationsReceived === undefined ? {} : { notificationsReceived: options.notificationsReceived }),
    deliveries: options.deliveries,
    claimsDb: options.claimsDb,
    tracing: options.tracing,
  });
  const housekeeping = keepHouse(options.housekeepingDb ?? db, {
    intervalMs: options.housekeepingIntervalMs ?? 5000,
    retentionSeconds: options.retentionSeconds ?? SHARED_SETTINGS.retentionSeconds.default,
    statsRetentionDays: options.statsRetentionDays ?? SHARED_SETTINGS.statsRetentionDays.default,
    budget,
    logger,
  });
  const done = Promise.all([jobs, housekeeping]).then(() => budget.dispose());
  return {
    stop: (graceMs) => {
      budget.stop(graceMs);
      return done;
    },
    done,
  };
}

/** Housekeeping every `intervalMs` until the drain stops; a failed round is logged and tried again next time. */
async function keepHouse(db: Queryable, options: HousekeepingOptions & { intervalMs: number }): Promise<void> {
  const { budget, logger } = options;
  if (options.intervalMs <= 0) return;
  while (!budget.stopped.aborted) {
    try {
      const counts = await runHousekeeping(db, options);
      if (Object.values(counts).some((count) => count > 0)) logger.info('housekeeping', { ...counts });
    } catch (error) {
      logger.error('housekeeping failed; trying again later', errorFields(error));
    }
    await sleep(options.intervalMs, budget.stopped);
  }
}
