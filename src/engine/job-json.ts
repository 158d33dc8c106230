import type { Job } from './types';

/** The fields of `skiplock.job_json()` that hold a timestamp. */
const TIMESTAMP_FIELDS = [
  'runAt',
  'expiresAt',
  'createdAt',
  'firstStartedAt',
  'startedAt',
  'finishedAt',
  'leaseExpiresAt',
] as const satisfies readonly (keyof Job)[];

/**
 * A job as `skiplock.job_json()` returns it, with the API's timestamps.
 * Postgres writes timestamps in JSON with microseconds and the session's
 * offset (cheap, where to_char per field was a third of a claim's cost);
 * the API shows them in UTC to the millisecond with a Z, as JavaScript's
 * Date does. Changes the row in place: it is fresh from the driver.
 */
export function toJob<T extends Job>(row: T): T {
  for (const field of TIMESTAMP_FIELDS) {
    const value = row[field];
    if (value !== null) row[field] = utcIso(value);
  }
  return row;
}

/** `2026-05-01T14:00:00.123456+02:00` as `2026-05-01T12:00:00.123Z`; a value Date cannot read (infinity) as it is. */
export function utcIso(timestamp: string): string {
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? timestamp : date.toISOString();
}
