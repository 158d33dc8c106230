import { WAITING_STATE } from './waiting-state.js';
import type { Queryable } from '../db/types.js';

/**
 * Whether the maintenance statements have anything to do: three index probes
 * in one statement. The statements that do the work (reclaim, expiry, dedup
 * keys) are large, and planning them costs far more than running them on a
 * queue with nothing to do; a new connection (a Worker's drain) plans them
 * all again. A round that finds nothing due plans only this.
 */
const maintenanceDueSql = /* sql */ `SELECT
  EXISTS (SELECT 1 FROM skiplock.jobs WHERE state = 'running' AND lease_expires_at < now()) AS "leasesExpired",
  EXISTS (SELECT 1 FROM skiplock.jobs
          WHERE expires_at <= now() AND ${WAITING_STATE}) AS "jobsExpired",
  EXISTS (SELECT 1 FROM skiplock.dedup_keys WHERE expires_at <= now()) AS "dedupKeysLapsed"`;

export interface MaintenanceDue {
  /** Running jobs whose lease ran out (reapExpiredLeases). */
  leasesExpired: boolean;
  /** Waiting jobs past their expires_at (expireJobs). */
  jobsExpired: boolean;
  /** Dedup keys whose window passed (releaseLapsedDedupKeys). */
  dedupKeysLapsed: boolean;
}

export async function maintenanceDue(db: Queryable): Promise<MaintenanceDue> {
  const [row] = await db.query<MaintenanceDue>({
    name: 'skiplock_maintenance_due',
    text: maintenanceDueSql,
    params: [],
  });
  return row!;
}
