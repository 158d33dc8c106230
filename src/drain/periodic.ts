import { Cron } from 'croner';
import type { Queryable } from '../db/types.js';
import { advanceSchedules, listDueSchedules, upsertSchedules, type ScheduleTick } from '../engine/schedules.js';
import type { JobType, PayloadOf } from '../engine/job-type.js';
import type { Json } from '../engine/types.js';
import { errorFields, type Logger } from './logger.js';
import type { JobRegistry } from './registry.js';

/** A job enqueued on a cron schedule. */
export interface PeriodicJob {
  /** Unique; renaming makes a new schedule. */
  name: string;
  /** 5 fields (minute first), or 6 with seconds first. */
  cron: string;
  type: string;
  /** Defaults to the type. */
  queue?: string;
  tenant?: string;
  payload?: Json;
  priority?: number;
  /** IANA zone the expression is read in; UTC by default. */
  timezone?: string;
}

/**
 * A periodic job of a job definition: `job` is the definition (`defineJob`),
 * and the payload must fit its schema where this compiles.
 */
export interface TypedPeriodicJob<J extends JobType> extends Omit<PeriodicJob, 'type' | 'payload'> {
  job: J;
  payload: PayloadOf<J>;
}

/**
 * A periodic job naming one of the job types `J` (a union of definitions):
 * its type must be one of their names and its payload must fit that one's schema.
 */
export type NamedPeriodicJob<J extends JobType> = J extends JobType
  ? Omit<PeriodicJob, 'type' | 'payload'> & { type: J['type']; payload: PayloadOf<J> }
  : never;

/**
 * Checks the expression at once, so a typo fails at start-up, not at the
 * first tick. Given the job's definition (`job`), its payload is checked
 * against the schema when this compiles; given a type name and the
 * definitions as the type argument (`definePeriodicJob<typeof jobs>(...)`),
 * the name and the payload are; given a type name alone, the payload is
 * checked when the drain or the worker starts, if one of its definitions has that type.
 */
export function definePeriodicJob<J extends JobType>(job: TypedPeriodicJob<J>): PeriodicJob;
export function definePeriodicJob<Jobs extends readonly JobType[]>(job: NamedPeriodicJob<Jobs[number]>): PeriodicJob;
export function definePeriodicJob(job: PeriodicJob): PeriodicJob;
export function definePeriodicJob(input: PeriodicJob | TypedPeriodicJob<JobType>): PeriodicJob {
  const job = 'job' in input ? periodicJobOf(input) : input;
  nextTick(job.cron, job.timezone ?? 'UTC', new Date());
  return job;
}

function periodicJobOf({ job, payload, ...schedule }: TypedPeriodicJob<JobType>): PeriodicJob {
  return { ...schedule, type: job.type, payload: payload as Json };
}

/** Refuses, naming the schedule and the field, a payload that does not fit its job type's schema. */
async function checkPayloads(registry: Pick<JobRegistry, 'schedules' | 'definitionOf'>): Promise<void> {
  for (const schedule of registry.schedules) {
    const definition = registry.definitionOf(schedule.type);
    if (definition === undefined) continue;
    const [issue] = await definition.checkPayload(schedule.payload ?? null);
    if (issue !== undefined) {
      const field = ['payload', issue.path].filter((part) => part !== '').join('.');
      throw new Error(`periodic job "${schedule.name}" (${schedule.type}): ${field}: ${issue.message}`);
    }
  }
}

/** The first tick strictly after `after`, or 'infinity' when the expression has none. */
function nextTick(cron: string, timezone: string, after: Date): string {
  const next = new Cron(cron, { timezone, paused: true }).nextRun(after);
  return next === null ? 'infinity' : next.toISOString();
}

/**
 * Writes the code's periodic jobs into skiplock.schedules (one statement;
 * unchanged ones are left alone), after checking their payloads against
 * their types' schemas.
 */
export async function syncPeriodicJobs(
  db: Queryable,
  registry: Pick<JobRegistry, 'schedules' | 'definitionOf'>,
): Promise<void> {
  await checkPayloads(registry);
  const now = new Date();
  await upsertSchedules(
    db,
    registry.schedules.map((job) => {
      const timezone = job.timezone ?? 'UTC';
      return {
        name: job.name,
        cron: job.cron,
        timezone,
        queue: job.queue ?? job.type,
        type: job.type,
        tenant: job.tenant ?? 'default',
        payload: job.payload ?? null,
        priority: job.priority ?? 0,
        nextRunAt: nextTick(job.cron, timezone, now),
      };
    }),
  );
}

/**
 * Enqueues one job for each due schedule, whoever defined it, and moves the
 * schedule on. Ticks missed while nothing drained are not replayed: a
 * schedule that fell behind runs once and resumes at its next future tick.
 * Returns the number of jobs enqueued; a tick that another drain won counts
 * for that drain only.
 */
export async function enqueueDuePeriodicJobs(db: Queryable, logger: Logger): Promise<number> {
  const due = await listDueSchedules(db);
  const ticks: ScheduleTick[] = [];
  for (const schedule of due) {
    // Past both the tick and the database's now: missed ticks are skipped.
    const after = new Date(Math.max(Date.parse(schedule.now), Date.parse(schedule.dueAtIso)));
    try {
      ticks.push({
        name: schedule.name,
        dueAt: schedule.dueAt,
        nextRunAt: nextTick(schedule.cron, schedule.timezone, after),
      });
    } catch (error) {
      // A bad expression written straight into the table must not stop the others.
      logger.error('cannot read the cron expression of a schedule; it is skipped', {
        schedule: schedule.name,
        cron: schedule.cron,
        ...errorFields(error),
      });
    }
  }
  return advanceSchedules(db, ticks);
}
