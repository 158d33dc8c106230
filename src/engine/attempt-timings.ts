import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import type { TenantScope } from './read-jobs.js';

/** The windows attempt timings are given over, and their lengths in seconds. */
export const TIMING_WINDOWS = { '1h': 3600, '24h': 86_400, '7d': 7 * 86_400 } as const;
export type TimingWindow = keyof typeof TIMING_WINDOWS;

export interface Percentiles {
  p50: number;
  p95: number;
}

/** The attempts of one queue and tenant that ended within the window. */
export interface AttemptTimingsRow {
  queue: string;
  tenant: string;
  /** Attempts that ended: succeeded, failed (retried or not) or cancelled while running. */
  attempts: number;
  succeeded: number;
  failed: number;
  /** From when the attempt was due (enqueued, or its run_at or retry time) until its handler started, in ms. */
  waitMs: Percentiles;
  /** From its handler's start until it ended, in ms. */
  runMs: Percentiles;
}

/**
 * Every attempt that ended in the window (skiplock.ended_attempts: a
 * success's row in the history, a failure's or cancellation's event), with
 * exact percentiles of its wait and run. Reads the window of the history and
 * the events through their BRIN indexes.
 */
const attemptTimingsSql = /* sql */ `
SELECT queue, tenant, count(*)::integer AS attempts,
       count(*) FILTER (WHERE succeeded)::integer AS succeeded,
       count(*) FILTER (WHERE NOT succeeded)::integer AS failed,
       json_build_object('p50', percentile_disc(0.5) WITHIN GROUP (ORDER BY wait_ms),
                         'p95', percentile_disc(0.95) WITHIN GROUP (ORDER BY wait_ms)) AS "waitMs",
       json_build_object('p50', percentile_disc(0.5) WITHIN GROUP (ORDER BY run_ms),
                         'p95', percentile_disc(0.95) WITHIN GROUP (ORDER BY run_ms)) AS "runMs"
FROM skiplock.ended_attempts(now() - make_interval(secs => $1), 'infinity')
WHERE $2::text IS NULL OR tenant = $2
GROUP BY queue, tenant
ORDER BY queue, tenant`;

/** Per queue and tenant, the attempts that ended in the window: counts, and p50 and p95 of their waits and runs. */
export async function attemptTimings(
  db: Queryable,
  window: TimingWindow,
  scope: TenantScope = {},
): Promise<AttemptTimingsRow[]> {
  if (!Object.hasOwn(TIMING_WINDOWS, window)) {
    throw new InvalidInputError(`window must be one of ${Object.keys(TIMING_WINDOWS).join(', ')}`, 'window');
  }
  return db.query<AttemptTimingsRow>({
    name: 'skiplock_attempt_timings',
    text: attemptTimingsSql,
    params: [TIMING_WINDOWS[window], scope.tenant ?? null],
  });
}
