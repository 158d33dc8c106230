import type { Job } from './types.js';

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
 * The last value read for each timestamp field, and what it was written as:
 * a claim's jobs share their start and lease times, and jobs enqueued in one
 * batch their creation and run times, so most fields need no rewriting.
 */
const lastRead: Array<string | undefined> = TIMESTAMP_FIELDS.map(() => undefined);
const lastWritten: string[] = TIMESTAMP_FIELDS.map(() => '');

/**
 * A job as `skiplock.job_json()` returns it, with the API's timestamps.
 * Postgres writes timestamps in JSON with microseconds and the session's
 * offset (cheap, where to_char per field was a third of a claim's cost);
 * the API shows them in UTC to the millisecond with a Z, as JavaScript's
 * Date does. Changes the row in place: it is fresh from the driver.
 */
export function toJob<T extends Omit<Job, 'tags'>>(row: T): T {
  for (let index = 0; index < TIMESTAMP_FIELDS.length; index++) {
    const field = TIMESTAMP_FIELDS[index]!;
    const value = row[field];
    if (value === null) continue;
    if (value !== lastRead[index]) {
      lastRead[index] = value;
      lastWritten[index] = utcIso(value);
    }
    row[field] = lastWritten[index]!;
  }
  return row;
}

/**
 * A UTC timestamp as Postgres writes it in JSON: seconds, an optional
 * fraction with trailing zeros dropped, and +00:00. Servers and Neon run in
 * UTC by default, and reformatting the text is several times cheaper than a
 * Date round trip for each of a claim's timestamps.
 */
const POSTGRES_UTC = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00:00$/;

/** `2026-05-01T14:00:00.123456+02:00` as `2026-05-01T12:00:00.123Z`; a value Date cannot read (infinity) as it is. */
export function utcIso(timestamp: string): string {
  const utc = POSTGRES_UTC.exec(timestamp);
  if (utc !== null) return `${utc[1]}.${(utc[2] ?? '').padEnd(3, '0').slice(0, 3)}Z`;
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? timestamp : date.toISOString();
}
