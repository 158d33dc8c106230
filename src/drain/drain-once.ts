import type { Queryable } from '../db/types.js';
import { DrainBudget } from './budget.js';
import {
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_STATS_RETENTION_DAYS,
  NO_HOUSEKEEPING,
  runHousekeeping,
  type HousekeepingCounts,
} from './housekeeping.js';
import type { JobCounts } from './job-counts.js';
import { runJobs } from './job-loop.js';
import { jsonConsoleLogger, type Logger } from './logger.js';
import { syncPeriodicJobs } from './periodic.js';
import type { JobRegistry } from './registry.js';
import type { QueueDeliveries } from './bulk-delivery/queue-deliveries.js';
import type { ConnectionGate } from './connection-gate.js';
import type { SubrequestBudget } from './subrequest-budget.js';
import type { WorkArrivals } from './work-arrivals.js';
import { drainWorkerId } from '../engine/worker-id.js';

export interface DrainOptions {
  /**
   * Wall time the drain may take, in seconds. Default 25: a Cron Trigger
   * that fires every minute gets 30 s of CPU (and 15 min of wall time), and
   * a drain's CPU time is below its wall time.
   */
  budgetSeconds?: number;
  /** Attempts running at once. Default 5: on Workers each may hold one of the 6 connections, the drain the last. */
  concurrency?: number;
  /** The jobs a drain claims at a time; default the free slots (see JobLoopOptions.claimBatchSize). */
  claimBatchSize?: number;
  /** Recorded on every claim. Default `drain-<random>`. */
  workerId?: string;
  /** Keep finished jobs this long before pruning them. Default 7 days. */
  retentionSeconds?: number;
  /** Keep the daily attempt statistics this many days. Default 365. */
  statsRetentionDays?: number;
  /** Reaping, expiry, periodic jobs and pruning before the jobs run. Default true; the fast path skips them. */
  housekeeping?: boolean;
  /** How long a handed-back job waits before it can run again. Default 1 s. */
  handBackDelaySeconds?: number;
  /** Enqueues announced while it runs: it claims again for them (see WorkArrivals). */
  arrivals?: WorkArrivals;
  /** The invocation's subrequest cap; without it the drain does not count them. */
  subrequests?: SubrequestBudget;
  /** The invocation's connections, when it limits them (Workers): handlers' `ctx.fetch` waits for one. */
  connections?: ConnectionGate;
  /** Called once, when a claim first comes back full (see JobLoopOptions.onBacklog). */
  onBacklog?: () => void;
  /** Delivers the jobs of queues with a delivery target it can reach (see QueueDeliveries); none when left out. */
  deliveries?: QueueDeliveries | undefined;
  logger?: Logger;
}

export type DrainCounts = HousekeepingCounts & JobCounts;

export const DEFAULT_DRAIN_BUDGET_SECONDS = 25;
export const DEFAULT_DRAIN_CONCURRENCY = 5;

/**
 * One drain: housekeeping, then the registry's jobs until the queue is empty
 * or the budget ends. Runtime-agnostic: `scheduled()` on Workers and tests
 * call it with any driver.
 */
export async function drainOnce(db: Queryable, registry: JobRegistry, options: DrainOptions = {}): Promise<DrainCounts> {
  const logger = options.logger ?? jsonConsoleLogger;
  const budget = new DrainBudget((options.budgetSeconds ?? DEFAULT_DRAIN_BUDGET_SECONDS) * 1000);
  try {
    let housekeeping = NO_HOUSEKEEPING;
    if (options.housekeeping ?? true) {
      await syncPeriodicJobs(db, registry.schedules);
      housekeeping = await runHousekeeping(db, {
        retentionSeconds: options.retentionSeconds ?? DEFAULT_RETENTION_SECONDS,
        statsRetentionDays: options.statsRetentionDays ?? DEFAULT_STATS_RETENTION_DAYS,
        budget,
        logger,
      });
    }
    const jobs = await runJobs(db, registry, {
      workerId: options.workerId ?? drainWorkerId('drain'),
      concurrency: options.concurrency ?? DEFAULT_DRAIN_CONCURRENCY,
      ...(options.claimBatchSize === undefined ? {} : { claimBatchSize: options.claimBatchSize }),
      budget,
      logger,
      handBackDelaySeconds: options.handBackDelaySeconds ?? 1,
      arrivals: options.arrivals,
      subrequests: options.subrequests,
      connections: options.connections,
      onBacklog: options.onBacklog,
      deliveries: options.deliveries,
    });
    return { ...housekeeping, ...jobs };
  } finally {
    budget.dispose();
  }
}
