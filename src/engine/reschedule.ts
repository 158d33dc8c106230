import type { Queryable } from '../db/types.js';
import { toJob } from './job-json.js';
import { getJob } from './read-jobs.js';
import type { Job } from './types.js';

export interface RescheduleChange {
  /** The new priority, -1000 to 1000. */
  priority?: number;
  /** The new time the job may start at: a past time means now. */
  runAt?: Date | string;
  /** Or: start no sooner than this many seconds from now. */
  delaySeconds?: number;
}

export type RescheduleOutcome =
  /** It was waiting: it waits with the new priority and time. */
  | 'rescheduled'
  /** It is running or has finished: only a waiting job can be changed. Nothing changed. */
  | 'not_waiting'
  /** The new time is past the job's expiresAt, so it could never start. Nothing changed. */
  | 'after_expiry';

export interface RescheduleResult {
  job: Job;
  outcome: RescheduleOutcome;
}

/**
 * Changes the priority or start time of a waiting job (skiplock.reschedule),
 * under its row lock so a claim cannot take it halfway, and records the
 * change as a `rescheduled` event.
 */
const rescheduleSql = /* sql */ `SELECT job, outcome
FROM skiplock.reschedule($1, $3, $4::timestamptz, make_interval(secs => $5::float8), $2)`;

/**
 * Changes when and in what order a waiting job runs. `tenant` scopes the
 * lookup for a tenant-bound caller: another tenant's job is not found
 * (undefined).
 */
export async function reschedule(
  db: Queryable,
  id: string,
  change: RescheduleChange,
  scope: { tenant?: string } = {},
): Promise<RescheduleResult | undefined> {
  if (change.runAt !== undefined && change.delaySeconds !== undefined) {
    throw new TypeError('reschedule: give runAt or delaySeconds, not both');
  }
  const runAt = change.runAt instanceof Date ? change.runAt.toISOString() : change.runAt;
  const [row] = await db.query<RescheduleResult>({
    name: 'skiplock_reschedule',
    text: rescheduleSql,
    params: [id, scope.tenant ?? null, change.priority ?? null, runAt ?? null, change.delaySeconds ?? null],
  });
  if (row !== undefined) return { job: toJob(row.job), outcome: row.outcome };
  // Not live: finished (in the history), or not there at all.
  const job = await getJob(db, id, { tenant: scope.tenant });
  return job && { job, outcome: 'not_waiting' };
}
