import type { Queryable } from '../db/types.js';
import { expireJobs, reapExpiredLeases, refreshStatistics, releaseLapsedDedupKeys } from '../engine/index.js';

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
 * next drain.
 */
export async function runMaintenance(db: Queryable, options: { batch?: number } = {}): Promise<MaintenanceCounts> {
  const limit = options.batch ?? 1000;
  const reaped = await reapExpiredLeases(db, { limit });
  const expired = await expireJobs(db, { limit });
  const dedupKeysReleased = await releaseLapsedDedupKeys(db, { limit });
  const statisticsRefreshed = (await refreshStatistics(db)) ? 1 : 0;
  return { reaped: reaped.length, expired, dedupKeysReleased, statisticsRefreshed };
}
