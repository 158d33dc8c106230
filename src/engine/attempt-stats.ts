import type { Queryable } from '../db/types.js';
import type { AttemptTimingsRow } from './attempt-timings.js';
import { InvalidInputError } from './errors.js';
import type { TenantScope } from './read-jobs.js';

/** The most days `dailyAttemptStats` reads back. */
export const MAX_STATS_DAYS = 1000;

/**
 * Sums the attempts that ended since the last rollup into the daily rows
 * (skiplock.roll_up_attempt_stats), whole hours at a time, and drops the
 * days past `keepDays`. Run before the history is pruned: pruning never
 * passes what the rollup has summed.
 */
const rollUpSql = /* sql */ `
SELECT rolled_through, rows_written, rows_dropped
FROM skiplock.roll_up_attempt_stats(make_interval(days => $1::integer))`;

export interface AttemptStatsRollup {
  /** Every attempt that ended before this is in the daily rows; undefined when another caller held the rollup. */
  rolledThrough?: Date;
  /** Daily rows (a queue and tenant on a day) made or added to. */
  rowsWritten: number;
  /** Daily rows dropped past the statistics' retention. */
  rowsDropped: number;
}

export async function rollUpAttemptStats(db: Queryable, options: { keepDays: number }): Promise<AttemptStatsRollup> {
  const [row] = await db.query<{ rolled_through: Date | string; rows_written: number; rows_dropped: number }>({
    name: 'skiplock_roll_up_attempt_stats',
    text: rollUpSql,
    params: [options.keepDays],
  });
  if (!row) return { rowsWritten: 0, rowsDropped: 0 };
  return { rolledThrough: new Date(row.rolled_through), rowsWritten: row.rows_written, rowsDropped: row.rows_dropped };
}

export interface DailyAttemptStats {
  /**
   * One row per day, queue and tenant with an attempt that ended, newest day
   * first. Percentiles are read from log-scale histograms: within 9% of the
   * exact figure.
   */
  daily: (AttemptTimingsRow & { day: string })[];
  /** One row per queue and tenant over all the days read. */
  totals: AttemptTimingsRow[];
}

/**
 * The daily rows of the last `days` days (UTC, today included), with the attempts
 * the rollup has not read yet summed the same way, so today's figures are
 * current. Per day and over the period (GROUPING SETS): summed histograms
 * give the period's percentiles, which adding daily percentiles could not.
 * A day with only lease lapses or expiries (no times) is left out.
 */
const dailyAttemptStatsSql = /* sql */ `
WITH period AS (
  SELECT (now() AT TIME ZONE 'UTC')::date - ($1::integer - 1) AS since
),
day_rows AS (
  SELECT d.* FROM skiplock.daily_attempt_stats d
  UNION ALL
  SELECT s.* FROM skiplock.attempt_stats_rollup r
  CROSS JOIN LATERAL skiplock.attempt_stats(r.rolled_through, 'infinity') s
)
SELECT grouping(day) = 1 AS total, day::text AS day, queue, tenant,
       sum(attempts)::float8 AS attempts, sum(succeeded)::float8 AS succeeded, sum(failed)::float8 AS failed,
       json_build_object('p50', skiplock.histogram_percentile(skiplock.histogram_sum(wait_ms_histogram), 0.5),
                         'p95', skiplock.histogram_percentile(skiplock.histogram_sum(wait_ms_histogram), 0.95)) AS "waitMs",
       json_build_object('p50', skiplock.histogram_percentile(skiplock.histogram_sum(run_ms_histogram), 0.5),
                         'p95', skiplock.histogram_percentile(skiplock.histogram_sum(run_ms_histogram), 0.95)) AS "runMs"
FROM day_rows
WHERE day >= (SELECT since FROM period) AND ($2::text IS NULL OR tenant = $2)
GROUP BY GROUPING SETS ((day, queue, tenant), (queue, tenant))
HAVING sum(attempts) > 0
ORDER BY total, day DESC, queue, tenant`;

interface DailyAttemptStatsRecord extends AttemptTimingsRow {
  total: boolean;
  day: string | null;
}

/** Per day and over the period, per queue and tenant: counts, and p50 and p95 of waits and runs. */
export async function dailyAttemptStats(
  db: Queryable,
  days: number,
  scope: TenantScope = {},
): Promise<DailyAttemptStats> {
  if (!Number.isInteger(days) || days < 1 || days > MAX_STATS_DAYS) {
    throw new InvalidInputError(`days must be a whole number from 1 to ${MAX_STATS_DAYS}`, 'days');
  }
  const records = await db.query<DailyAttemptStatsRecord>({
    name: 'skiplock_daily_attempt_stats',
    text: dailyAttemptStatsSql,
    params: [days, scope.tenant ?? null],
  });
  const daily: DailyAttemptStats['daily'] = [];
  const totals: AttemptTimingsRow[] = [];
  for (const { total, day, ...row } of records) {
    if (total) totals.push(row);
    else daily.push({ day: day!, ...row });
  }
  return { daily, totals };
}
