import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';

/**
 * How long finished jobs are kept: seconds (60 or more), or `'none'`: a
 * succeeded job keeps no history, while a failed, cancelled or expired one
 * is kept for the next retention in line (its queue's, else the default),
 * so the dead set stays for redrive.
 */
export type Retention = number | 'none';

/** The least retention in seconds: a shorter one is a mistake (or `'none'`, said so). */
export const MIN_RETENTION_SECONDS = 60;

/** Whether `value` is a retention: `'none'`, or whole seconds from a minute (at most ten years). */
export function isRetention(value: unknown): value is Retention {
  return (
    value === 'none' ||
    (Number.isInteger(value) && (value as number) >= MIN_RETENTION_SECONDS && (value as number) <= 315_360_000)
  );
}

/** Throws an InvalidInputError naming `field` unless `value` is a retention. */
export function checkRetention(value: unknown, field: string): asserts value is Retention {
  if (isRetention(value)) return;
  throw new InvalidInputError(
    `${field}: a retention is whole seconds from ${MIN_RETENTION_SECONDS} to 315360000 (ten years), or "none" to keep no history of succeeded jobs; got ${JSON.stringify(value)}`,
    field,
  );
}

const defineJobTypesSql = /* sql */ `SELECT skiplock.define_job_types($1::text[], $2::integer[])`;

/**
 * Writes the retention of each job type a drain runs to `skiplock.job_types`
 * (undefined: none of its own, so its queue's or the default applies), where
 * every drain's pruning reads it. Only what differs is written.
 */
export async function defineJobTypeRetentions(
  db: Queryable,
  types: ReadonlyArray<{ type: string; retentionSeconds: Retention | undefined }>,
): Promise<void> {
  if (types.length === 0) return;
  await db.query({
    name: 'skiplock_define_job_types',
    text: defineJobTypesSql,
    params: [
      types.map((entry) => entry.type),
      types.map(({ retentionSeconds }) =>
        retentionSeconds === undefined ? null : retentionSeconds === 'none' ? 0 : retentionSeconds,
      ),
    ],
  });
}
