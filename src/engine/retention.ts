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

/** A job type's own retention, and who set it. */
export interface JobTypeRetention {
  type: string;
  /** Seconds, `'none'` (no history of succeeded jobs), or null: the queue's retention or the default applies. */
  retentionSeconds: Retention | null;
  /**
   * `definition`: the drains that run the type write its definition's retention here.
   * `operator`: set over the API, the CLI or SQL, and left alone by the drains until handed back.
   */
  setBy: 'definition' | 'operator';
  updatedAt: string;
}

// A retention of 0 is "none" (the database's CHECK allows 0 or a minute and more).
const JOB_TYPE_JSON = /* sql */ `
  type, CASE WHEN retention_seconds = 0 THEN to_jsonb('none'::text) ELSE to_jsonb(retention_seconds) END AS "retentionSeconds",
  set_by AS "setBy", skiplock.iso(updated_at) AS "updatedAt"`;

const listJobTypeRetentionsSql = /* sql */ `SELECT ${JOB_TYPE_JSON} FROM skiplock.job_types ORDER BY type`;

const setJobTypeRetentionSql = /* sql */ `
SELECT ${JOB_TYPE_JSON} FROM skiplock.set_job_type_retention($1, $2, $3)`;

/** The job types with a retention row: those a definition or an operator gave one (and those handed back since). */
export async function listJobTypeRetentions(db: Queryable): Promise<JobTypeRetention[]> {
  return db.query<JobTypeRetention>({
    name: 'skiplock_list_job_type_retentions',
    text: listJobTypeRetentionsSql,
    params: [],
  });
}

/**
 * Sets a job type's retention as an operator: it wins over the type's
 * definition (the drains no longer write it) until {@link handBackJobTypeRetention}.
 * Null: none of its own, so its queue's retention or the default applies.
 */
export async function setJobTypeRetention(
  db: Queryable,
  type: string,
  retentionSeconds: Retention | null,
): Promise<JobTypeRetention> {
  checkJobTypeName(type);
  if (retentionSeconds !== null) checkRetention(retentionSeconds, 'retentionSeconds');
  return writeJobTypeRetention(db, type, retentionSeconds === 'none' ? 0 : retentionSeconds, true);
}

/**
 * Hands a job type's retention back to its definition: cleared now, and
 * written by the next drain that runs the type (none if its definition gives none).
 */
export async function handBackJobTypeRetention(db: Queryable, type: string): Promise<JobTypeRetention> {
  checkJobTypeName(type);
  return writeJobTypeRetention(db, type, null, false);
}

async function writeJobTypeRetention(
  db: Queryable,
  type: string,
  seconds: number | null,
  byOperator: boolean,
): Promise<JobTypeRetention> {
  const [row] = await db.query<JobTypeRetention>({
    name: 'skiplock_set_job_type_retention',
    text: setJobTypeRetentionSql,
    params: [type, seconds, byOperator],
  });
  return row!;
}

function checkJobTypeName(type: unknown): asserts type is string {
  if (typeof type === 'string' && type.length >= 1 && type.length <= 128) return;
  throw new InvalidInputError(`type: a job type is 1 to 128 characters; got ${JSON.stringify(type)}`, 'type');
}
