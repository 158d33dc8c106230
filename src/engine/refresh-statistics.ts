import type { Queryable } from '../db/types.js';

/** Analyzes skiplock.jobs when its statistics are missing or stale (skiplock.refresh_statistics). */
const refreshStatisticsSql = /* sql */ `SELECT skiplock.refresh_statistics() AS refreshed`;

/** True when it analyzed the jobs table. */
export async function refreshStatistics(db: Queryable): Promise<boolean> {
  const [row] = await db.query<{ refreshed: boolean }>({
    name: 'skiplock_refresh_statistics',
    text: refreshStatisticsSql,
    params: [],
  });
  return row?.refreshed ?? false;
}
