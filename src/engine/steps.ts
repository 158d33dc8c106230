import type { Queryable } from '../db/types.js';
import { checkBatch, type EnqueueInput } from './enqueue.js';
import { InvalidInputError } from './errors.js';
import type { TenantScope } from './read-jobs.js';
import type { JobStatus, Json, Lease } from './types.js';

/**
 * A job's durable steps (migrations/0004_durable_steps.sql): the statements a
 * running attempt's steps make, each fenced by its lease token, and the read
 * of a job's steps for the API. The handler-facing side is src/drain/steps.ts.
 */

export type StepKind = 'do' | 'sleep' | 'event' | 'invoke';

/** What a later run of the job needs of a step recorded earlier. */
export interface StoredStep {
  name: string;
  kind: StepKind;
  /** Its result is recorded; a `do` step that failed and waits to retry is not done. */
  done: boolean;
  result: Json;
  failedAttempts: number;
}

/** A step's result to record, with the lease that must still own its job. */
export interface StepToRecord extends Lease {
  name: string;
  result: Json;
  /** The lease the same statement extends to, from now, once half of the current one is spent. */
  leaseSeconds: number;
}

/**
 * How a step that may park its job ended: done (with its result), the job
 * parked (the attempt must end now and write nothing more), the token no
 * longer owning the job, or a cancellation asked for while it ran.
 */
export type StepAnswer =
  | { status: 'done'; result: Json }
  | { status: 'parked'; childId?: string }
  | { status: 'lease-lost' }
  | { status: 'cancel-requested' };

/** The longest timeout of an event wait and the longest sleep. */
export const MAX_WAIT_SECONDS = 366 * 24 * 3600;

const loadStepsSql = /* sql */ `
SELECT job_id AS "jobId", name, kind, done, result, failed_attempts AS "failedAttempts"
FROM skiplock.job_steps
WHERE job_id = ANY ($1::uuid[])`;

/** The steps recorded for each of these jobs: one statement for any number. */
export async function loadSteps(db: Queryable, jobIds: readonly string[]): Promise<Map<string, StoredStep[]>> {
  const rows = await db.query<StoredStep & { jobId: string }>({
    name: 'skiplock_load_steps',
    text: loadStepsSql,
    params: [jobIds],
  });
  const byJob = new Map<string, StoredStep[]>(jobIds.map((id) => [id, []]));
  for (const { jobId, ...step } of rows) byJob.get(jobId)?.push(step);
  return byJob;
}

const recordStepsSql = /* sql */ `SELECT job_id AS "jobId", name FROM skiplock.record_steps($1::jsonb)`;

/**
 * Records step results of any number of running jobs in one statement, each
 * with its job's lease extended once half of it is spent. Answers which were recorded, as
 * `jobId` + NUL + name: one missing lost its lease and changed nothing.
 */
export async function recordSteps(db: Queryable, steps: readonly StepToRecord[]): Promise<Set<string>> {
  const rows = await db.query<{ jobId: string; name: string }>({
    name: 'skiplock_record_steps',
    text: recordStepsSql,
    params: [
      JSON.stringify(
        steps.map(({ id, leaseToken, name, result, leaseSeconds }) => ({
          jobId: id,
          leaseToken,
          name,
          result,
          leaseSeconds,
        })),
      ),
    ],
  });
  return new Set(rows.map((row) => stepKey(row.jobId, row.name)));
}

export function stepKey(jobId: string, name: string): string {
  return `${jobId}\u0000${name}`;
}

const sleepStepSql = /* sql */ `SELECT skiplock.sleep_step($1::uuid, $2::uuid, $3::text, $4::timestamptz) AS answer`;

/** Records a sleep's end (once) and parks the job until then, unless that time has come. */
export function sleepStep(db: Queryable, lease: Lease, name: string, until: Date): Promise<StepAnswer> {
  checkUntil(until, 'until');
  return answer(db, 'skiplock_sleep_step', sleepStepSql, [lease.id, lease.leaseToken, name, until.toISOString()]);
}

const stepFailedSql = /* sql */ `SELECT skiplock.step_failed($1::uuid, $2::uuid, $3::text, $4::jsonb, $5::timestamptz) AS answer`;

/** A `do` step failed with retries left: its failure counted and the job parked until `retryAt`. */
export function stepFailed(db: Queryable, lease: Lease, name: string, error: Json, retryAt: Date): Promise<StepAnswer> {
  return answer(db, 'skiplock_step_failed', stepFailedSql, [
    lease.id,
    lease.leaseToken,
    name,
    JSON.stringify(error),
    retryAt.toISOString(),
  ]);
}

export interface EventWait {
  /** The step's name. */
  name: string;
  event: string;
  /** Only an event sent with this key; any key when left out. */
  key?: string | undefined;
  timeoutAt: Date;
  leaseSeconds: number;
}

const waitForEventSql = /* sql */ `
SELECT skiplock.wait_for_event($1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::timestamptz, $7::integer) AS answer`;

/** The event (`{ payload, sentAt }`, or null once the wait timed out), or the job parked until it comes. */
export function waitForEventStep(db: Queryable, lease: Lease, wait: EventWait): Promise<StepAnswer> {
  checkEventName(wait.event, 'event');
  if (wait.key !== undefined) checkEventKey(wait.key, 'key');
  checkUntil(wait.timeoutAt, 'timeout');
  return answer(db, 'skiplock_wait_for_event', waitForEventSql, [
    lease.id,
    lease.leaseToken,
    wait.name,
    wait.event,
    wait.key ?? null,
    wait.timeoutAt.toISOString(),
    wait.leaseSeconds,
  ]);
}

const invokeChildrenSql = /* sql */ `
SELECT skiplock.invoke_children($1::uuid, $2::uuid, $3::jsonb, $4::integer) AS answer`;

/** A child to invoke, under the step name its end is recorded as. */
export interface ChildInvoke {
  name: string;
  child: EnqueueInput;
}

/**
 * The invokes a handler made at once: when every child has ended, their ends
 * by step name (each `{ jobId, status, result, error }`); else the children
 * not yet enqueued are (in the parent's tenant) and the parent parks until
 * all have ended.
 */
export async function invokeChildrenStep(
  db: Queryable,
  lease: Lease,
  invokes: readonly ChildInvoke[],
  leaseSeconds: number,
): Promise<StepAnswer> {
  const children = invokes.map(({ name, child }) => {
    checkBatch([child]);
    if (child.dedupKey !== undefined) {
      throw new InvalidInputError(`step "${name}": a child job takes no dedupKey (its step is its key)`, 'dedupKey');
    }
    const { tenant: _parentsTenant, ...rest } = child;
    return { name, child: rest };
  });
  return answer(db, 'skiplock_invoke_children', invokeChildrenSql, [
    lease.id,
    lease.leaseToken,
    JSON.stringify(children),
    leaseSeconds,
  ]);
}

async function answer(db: Queryable, name: string, text: string, params: unknown[]): Promise<StepAnswer> {
  const [row] = await db.query<{ answer: StepAnswer & { result?: Json } }>({ name, text, params });
  const { answer } = row!;
  if (answer.status === 'done') return { status: 'done', result: answer.result ?? null };
  return answer;
}

function checkUntil(until: Date, field: string): void {
  const seconds = (until.getTime() - Date.now()) / 1000;
  if (!Number.isFinite(seconds) || seconds > MAX_WAIT_SECONDS) {
    throw new InvalidInputError(`${field} must be a time within ${MAX_WAIT_SECONDS / 86_400} days`, field);
  }
}

export function checkEventName(event: unknown, field: string): asserts event is string {
  if (typeof event !== 'string' || event.length < 1 || event.length > 200) {
    throw new InvalidInputError(`${field} must be a name of 1 to 200 characters`, field);
  }
}

export function checkEventKey(key: unknown, field: string): asserts key is string {
  if (typeof key !== 'string' || key.length < 1 || key.length > 200) {
    throw new InvalidInputError(`${field} must be 1 to 200 characters when given`, field);
  }
}

/** A step as the API shows it. */
export interface JobStep {
  name: string;
  kind: StepKind;
  status: 'done' | 'retrying';
  result: Json;
  failedAttempts: number;
  lastError: Json;
  attempt: number | null;
  recordedAt: string;
}

/** A job's steps, what it waits for now, and the jobs it is linked to. */
export interface JobSteps {
  steps: JobStep[];
  /** What a parked job waits for (an event until its timeout, a child's end, dependencies), or a held one (its key's turn). */
  waitingFor: Array<
    | { kind: 'sleep'; step: string; until: string }
    | { kind: 'event'; step: string; event: string; key: string | null; timeoutAt: string }
    | { kind: 'child'; step: string; jobId: string }
    | { kind: 'dependency'; jobId: string }
    | { kind: 'key'; key: string; ordered: boolean; blockedBy: string | null }
    | { kind: 'debounce'; key: string; until: string; enqueues: number }
  >;
  /** Children it invoked and dependencies of a flow (and jobs that depend on it), ended or not. */
  links: Array<{
    kind: 'child' | 'dependency' | 'dependent' | 'parent';
    jobId: string;
    type: string | null;
    status: JobStatus | null;
    step: string | null;
    resolvedAt: string | null;
  }>;
}

const getJobStepsSql = /* sql */ `
WITH job AS (
  SELECT id FROM skiplock.all_jobs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
)
SELECT
  (SELECT coalesce(json_agg(json_build_object(
     'name', s.name, 'kind', s.kind, 'status', CASE WHEN s.done THEN 'done' ELSE 'retrying' END,
     'result', s.result, 'failedAttempts', s.failed_attempts, 'lastError', s.last_error,
     'attempt', s.attempt, 'recordedAt', skiplock.iso(s.recorded_at)) ORDER BY s.recorded_at, s.name), '[]')
   FROM skiplock.job_steps s WHERE s.job_id = job.id) AS steps,
  (SELECT coalesce(json_agg(waits.w ORDER BY waits.since), '[]') FROM (
     SELECT json_build_object('kind', 'event', 'step', e.step_name, 'event', e.event, 'key', e.key,
                              'timeoutAt', skiplock.iso(e.timeout_at)) AS w, e.since
     FROM skiplock.event_waits e WHERE e.job_id = job.id
     UNION ALL
     SELECT json_build_object('kind', 'sleep', 'step', s.name, 'until', s.result->>'until'), s.recorded_at
     FROM skiplock.job_steps s JOIN skiplock.jobs j ON j.id = s.job_id
     WHERE s.job_id = job.id AND s.kind = 'sleep' AND j.state = 'parked'
       AND (s.result->>'until')::timestamptz > now()
     UNION ALL
     SELECT CASE WHEN l.kind = 'child'
                 THEN json_build_object('kind', 'child', 'step', l.step_name, 'jobId', l.other_id)
                 ELSE json_build_object('kind', 'dependency', 'jobId', l.other_id) END, l.created_at
     FROM skiplock.job_links l WHERE l.job_id = job.id AND l.resolved_at IS NULL
     UNION ALL
     SELECT json_build_object('kind', 'key', 'key', kj.key, 'ordered', kj.ordered, 'blockedBy', c.blocked_by), now()
     FROM skiplock.keyed_jobs kj
     LEFT JOIN skiplock.concurrency_keys c ON c.tenant = kj.tenant AND c.key = kj.key
     WHERE kj.job_id = job.id AND kj.slot = 'waiting'
     UNION ALL
     -- A debounced job that has not started, by its latest debounce.
     (SELECT json_build_object('kind', 'debounce', 'key', e.detail->>'key', 'until', skiplock.iso(j.run_at),
                               'enqueues', (e.detail->>'enqueues')::integer), e.at
      FROM skiplock.job_events e JOIN skiplock.jobs j ON j.id = e.job_id
      WHERE e.job_id = job.id AND e.kind = 'debounced' AND j.first_started_at IS NULL AND j.state <> 'running'
      ORDER BY e.id DESC LIMIT 1)) waits) AS "waitingFor",
  (SELECT coalesce(json_agg(json_build_object(
     'kind', link.kind, 'jobId', link.id, 'type', o.type, 'status', skiplock.job_status(o.state, o.run_at),
     'step', link.step_name, 'resolvedAt', skiplock.iso(link.resolved_at)) ORDER BY link.created_at, link.id), '[]')
   FROM (SELECT l.kind, l.other_id AS id, l.step_name, l.resolved_at, l.created_at
         FROM skiplock.job_links l WHERE l.job_id = job.id
         UNION ALL
         SELECT CASE l.kind WHEN 'child' THEN 'parent' ELSE 'dependent' END, l.job_id, l.step_name, l.resolved_at,
                l.created_at
         FROM skiplock.job_links l WHERE l.other_id = job.id) link
   LEFT JOIN skiplock.all_jobs o ON o.id = link.id) AS links
FROM job`;

/** A job's steps, waits and links; null when there is no such job (in the scope's tenant). */
export async function getJobSteps(db: Queryable, id: string, scope: TenantScope = {}): Promise<JobSteps | null> {
  const [row] = await db.query<JobSteps>({
    name: 'skiplock_get_job_steps',
    text: getJobStepsSql,
    params: [id, scope.tenant ?? null],
  });
  return row ?? null;
}
