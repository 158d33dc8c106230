import type { Queryable } from '../db/types.js';
import { expireJobs, reapExpiredLeases, refreshStatistics, releaseLapsedDedupKeys } from '../engine/index.js';
import { maintenanceDue } from '../engine/maintenance-due.js';

export interface MaintenanceCounts {
  /** Running jobs whose lease ran out, handed back to the queue (or failed). */
  reaped: number;
  /** Waiting jobs past their expires_at. */
  expired: number;
  /** Dedup keys of finished jobs whose window passed. */
  dedupKeysReleased: number;
  /** 1 when the jobs table's planner statistics were stale and refreshed. */
  statisticsRefreshed: number;
}

/**
 * The housekeeping every drain does first, as one `runOnce` that returns
 * counts (River's maintenance services, called from `scheduled()` on Workers).
 * Each step is bounded; a backlog larger than one batch is finished by the
 * next drain. A step runs only when a probe finds it something to do
 * (maintenanceDue); what becomes due meanwhile waits for the next round.
 */
export async function runMaintenance(db: Queryable, options: { batch?: number } = {}): Promise<MaintenanceCounts> {
  const limit = options.batch ?? 1000;
  const due = await maintenanceDue(db);
  const reaped = due.leasesExpired ? (await reapExpiredLeases(db, { limit })).length : 0;
  const expired = due.jobsExpired ? await expireJobs(db, { limit }) : 0;
  const dedupKeysReleased = due.dedupKeysLapsed ? await releaseLapsedDedupKeys(db, { limit }) : 0;
  const statisticsRefreshed = (await refreshStatistics(db)) ? 1 : 0;
  return { reaped, expired, dedupKeysReleased, statisticsRefreshed };
}
