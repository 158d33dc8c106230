import type { Queryable } from '../db/types.js';
import { DrainBudget } from './budget.js';
import { syncJobTypeRetentions } from './job-type-retentions.js';
import { NO_HOUSEKEEPING, runHousekeeping, type HousekeepingCounts } from './housekeeping.js';
import type { JobCounts } from './job-counts.js';
import { runJobs } from './job-loop.js';
import { jsonConsoleLogger, type Logger } from './logger.js';
import { syncPeriodicJobs } from './periodic.js';
import type { JobRegistry } from './registry.js';
import { SHARED_SETTINGS } from './settings.js';
import type { QueueDeliveries } from './bulk-delivery/queue-deliveries.js';
import type { ConnectionGate } from './connection-gate.js';
import type { SubrequestBudget } from './subrequest-budget.js';
import type { WorkArrivals } from './work-arrivals.js';
import { drainWorkerId } from '../engine/worker-id.js';
import type { Tracing } from '../engine/tracing.js';

export interface DrainOptions {
  /** Wall time the drain may take, in seconds (a Worker's: DRAIN_BUDGET_SECONDS, FAST_PATH_BUDGET_SECONDS). */
  budgetSeconds: number;
  /**
   * Attempts running at once (a Worker's: DRAIN_CONCURRENCY). On Workers,
   * more than 5 want `connections`: without it each attempt may hold one of
   * the invocation's 6 connections, and the drain needs the last.
   */
  concurrency: number;
  /** The jobs a drain claims at a time; default the free slots (see JobLoopOptions.claimBatchSize). */
  claimBatchSize?: number | 'auto';
  /** Recorded on every claim. Default `skiplock:drain-<random>` (see drainWorkerId). */
  workerId?: string;
  /** Keep finished jobs this long before pruning them. Default RETENTION_SECONDS's. */
  retentionSeconds?: number;
  /** Keep the daily attempt statistics this many days. Default STATS_RETENTION_DAYS's. */
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
  /** Called when a claim comes back full (see JobLoopOptions.onBacklog). */
  onBacklog?: () => void;
  /** Delivers the jobs of queues with a delivery target it can reach (see QueueDeliveries); none when left out. */
  deliveries?: QueueDeliveries | undefined;
  /** Runs each attempt in a span of its job's trace (see `openTelemetry`); no spans when left out. */
  tracing?: Tracing | undefined;
  logger?: Logger;
}

export type DrainCounts = HousekeepingCounts & JobCounts;

/**
 * One drain: housekeeping, then the registry's jobs until the queue is empty
 * or the budget ends. Runtime-agnostic: `scheduled()` on Workers and tests
 * call it with any driver.
 */
export async function drainOnce(db: Queryable, registry: JobRegistry, options: DrainOptions): Promise<DrainCounts> {
  const logger = options.logger ?? jsonConsoleLogger;
  const budget = new DrainBudget(options.budgetSeconds * 1000);
  try {
    let housekeeping = NO_HOUSEKEEPING;
    if (options.housekeeping ?? true) {
      await syncPeriodicJobs(db, registry);
      await syncJobTypeRetentions(db, registry);
      housekeeping = await runHousekeeping(db, {
        retentionSeconds: options.retentionSeconds ?? SHARED_SETTINGS.retentionSeconds.default,
        statsRetentionDays: options.statsRetentionDays ?? SHARED_SETTINGS.statsRetentionDays.default,
        budget,
        logger,
      });
    }
    const jobs = await runJobs(db, registry, {
      workerId: options.workerId ?? drainWorkerId('drain'),
      concurrency: options.concurrency,
      ...(options.claimBatchSize === undefined ? {} : { claimBatchSize: options.claimBatchSize }),
      budget,
      logger,
      handBackDelaySeconds: options.handBackDelaySeconds ?? 1,
      arrivals: options.arrivals,
      subrequests: options.subrequests,
      connections: options.connections,
      onBacklog: options.onBacklog,
      deliveries: options.deliveries,
      tracing: options.tracing,
    });
    return { ...housekeeping, ...jobs };
  } finally {
    budget.dispose();
  }
}
