import type { Queryable } from '../db/types.js';
import { rollUpAttemptStats } from '../engine/attempt-stats.js';
import { compactJobCounts } from '../engine/metrics.js';
import { maintainHistory, pruneEvents, type HistoryMaintenance } from '../engine/prune.js';
import type { DrainBudget } from './budget.js';
import type { Logger } from './logger.js';
import { runMaintenance, type MaintenanceCounts } from './maintenance.js';
import { enqueueDuePeriodicJobs } from './periodic.js';

const PRUNE_BATCH = 1000;
/** Pruning is bounded per drain, so a backlog of history never eats the time meant for jobs. */
const MAX_PRUNE_BATCHES = 5;

export interface HousekeepingCounts extends MaintenanceCounts, HistoryMaintenance {
  /** Jobs enqueued by due periodic schedules. */
  periodicEnqueued: number;
  /** Events deleted past the retention. */
  prunedEvents: number;
  /** Daily attempt statistics rows made or added to by the rollup. */
  statsRowsWritten: number;
  /** Daily attempt statistics rows dropped past their retention. */
  statsRowsDropped: number;
}

export interface HousekeepingOptions {
  retentionSeconds: number;
  statsRetentionDays: number;
  budget: DrainBudget;
  logger: Logger;
}

export const NO_HOUSEKEEPING: HousekeepingCounts = {
  reaped: 0,
  expired: 0,
  dedupKeysReleased: 0,
  statisticsRefreshed: 0,
  periodicEnqueued: 0,
  createdDays: 0,
  droppedDays: 0,
  deletedJobs: 0,
  prunedTraceContexts: 0,
  prunedEvents: 0,
  statsRowsWritten: 0,
  statsRowsDropped: 0,
};

/**
 * Everything a drain does before it runs jobs: hand back expired leases,
 * expire what can no longer start, enqueue due periodic jobs, sum the
 * attempts that ended into the daily statistics, fold the live job counts, and apply the retention to
 * the history (which never prunes what the statistics have not summed). Each step is bounded; a backlog larger than
 * one round is finished by the next.
 */
export async function runHousekeeping(db: Queryable, options: HousekeepingOptions): Promise<HousekeepingCounts> {
  const maintenance = await runMaintenance(db);
  const periodicEnqueued = await enqueueDuePeriodicJobs(db, options.logger);
  const rollup = await rollUpAttemptStats(db, { keepDays: options.statsRetentionDays });
  const history = await maintainHistory(db, { retentionSeconds: options.retentionSeconds });
  // The live counts' ledger gains a row per statement that changes jobs; folded each round, a scrape sums a few.
  await compactJobCounts(db);
  let prunedEvents = 0;
  for (let batch = 0; batch < MAX_PRUNE_BATCHES && options.budget.claiming; batch++) {
    const deleted = await pruneEvents(db, { retentionSeconds: options.retentionSeconds, limit: PRUNE_BATCH });
    prunedEvents += deleted;
    if (deleted < PRUNE_BATCH) break;
  }
  return {
    ...maintenance,
    ...history,
    periodicEnqueued,
    prunedEvents,
    statsRowsWritten: rollup.rowsWritten,
    statsRowsDropped: rollup.rowsDropped,
  };
}
