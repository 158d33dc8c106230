import type { Queryable } from '../db/types.js';
import type { RateOnExcess } from './enqueue.js';
import type { TenantScope } from './read-jobs.js';
import { InvalidInputError } from './errors.js';
import { checkRetention, type Retention } from './retention.js';
import type { RateLimit } from './tenants.js';
import type { DeliveryTarget } from './types.js';

/** A queue's rate limit, and what becomes of a job beyond it. */
export interface QueueRateLimit extends RateLimit {
  /**
   * `throttle`: the excess waits in the queue for room. `drop`: a job enqueued while the window has
   * no room (its starts, and the jobs let through but not started yet, count) ends `cancelled`.
   */
  onExcess: RateOnExcess;
}

export interface QueueSettings {
  /** Running jobs of the queue at once, over all tenants; null for no cap. */
  concurrency: number | null;
  /** Share of each tenant's turns when its queues compete, 1..1000. */
  weight: number;
  /**
   * Jobs of the queue that may start in any window of `perSeconds` seconds, over all tenants (every
   * attempt counts; the excess waits, or is dropped at enqueue); null for no limit.
   */
  rateLimit: QueueRateLimit | null;
  /** Where the queue's jobs go, whatever their type, instead of to handlers; null for handlers. */
  delivery: DeliveryTarget | null;
  /** When the queue was paused (ISO-8601); null while it runs. */
  pausedAt: string | null;
  /**
   * How long the queue's finished jobs are kept, in seconds (60 or more), or `'none'`: its succeeded
   * jobs keep no history. Null for the default (RETENTION_SECONDS); a job type's own retention wins.
   */
  retentionSeconds: Retention | null;
  /**
   * Where the queue's jobs that fail for good move, to wait again with fresh attempts (once a job);
   * null for none: they stay failed in the queue.
   */
  deadLetterQueue: string | null;
}

export interface Queue extends QueueSettings {
  name: string;
  /** False when the queue runs on the defaults (no cap, weight 1, no delivery target, running, the default retention, no dead-letter queue). */
  custom: boolean;
  /** Jobs of the queue running now (of the scope's tenant, when it has one). */
  running: number;
  /** With a rate limit: the queue's starts (every tenant's) in the window that ends now; else null. */
  startsInWindow: number | null;
}

/** The most starts a queue's rate limit allows per window, and the longest window. */
export const MAX_QUEUE_RATE_LIMIT = 10_000;
export const MAX_QUEUE_RATE_SECONDS = 86_400;

// A retention of 0 is "none" (the database's CHECK allows 0 or a minute and more).
const RETENTION_JSON = `CASE WHEN q.retention_seconds = 0 THEN to_jsonb('none'::text) ELSE to_jsonb(q.retention_seconds) END`;
const RATE_LIMIT_JSON = `CASE WHEN q.rate_limit IS NOT NULL THEN json_build_object('count', q.rate_limit, 'perSeconds', q.rate_seconds, 'onExcess', q.rate_mode) END`;

// A queue without a row of its own runs on the defaults: no cap, weight 1, handlers.
const getQueueSql = /* sql */ `
SELECT $1::text AS name, q.concurrency, coalesce(q.weight, 1) AS weight, q.delivery,
       skiplock.iso(q.paused_at) AS "pausedAt", ${RETENTION_JSON} AS "retentionSeconds",
       q.dead_letter_queue AS "deadLetterQueue", ${RATE_LIMIT_JSON} AS "rateLimit", q.name IS NOT NULL AS custom,
       (SELECT count(*)::integer FROM skiplock.jobs r
        WHERE r.queue = $1 AND r.state = 'running' AND ($2::text IS NULL OR r.tenant = $2)) AS running,
       CASE WHEN q.rate_limit IS NOT NULL THEN skiplock.window_starts(q.starts, q.rate_seconds, clock_timestamp()) END
         AS "startsInWindow"
FROM (SELECT 1) one
LEFT JOIN skiplock.queues q ON q.name = $1`;

const listQueueSettingsSql = /* sql */ `
SELECT name, concurrency, weight, delivery, skiplock.iso(paused_at) AS "pausedAt", ${RETENTION_JSON} AS "retentionSeconds",
       dead_letter_queue AS "deadLetterQueue", ${RATE_LIMIT_JSON} AS "rateLimit"
FROM skiplock.queues q ORDER BY name`;

// A rate limit's starts stay through a change of its numbers (the new ones judge them), and go with it;
// the turns a dropping queue gave stay while it drops (its jobs let through still count), and go with that.
const setQueueSql = /* sql */ `
WITH set AS (
  INSERT INTO skiplock.queues AS q
    (name, concurrency, weight, delivery, retention_seconds, dead_letter_queue, rate_limit, rate_seconds, rate_mode,
     updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
  ON CONFLICT (name) DO UPDATE
  SET concurrency = $2, weight = $3, delivery = $4, retention_seconds = $5, dead_letter_queue = $6,
      rate_limit = $7, rate_seconds = $8, rate_mode = $9,
      starts = CASE WHEN $7::integer IS NULL THEN '{}' ELSE q.starts END, updated_at = now()
)
DELETE FROM skiplock.queue_turns t WHERE t.queue = $1 AND $9::text <> 'drop'`;

/** A queue's settings (its own, or the defaults) and its running count. */
export async function getQueue(db: Queryable, name: string, scope: TenantScope = {}): Promise<Queue> {
  const [row] = await db.query<Queue>({
    name: 'skiplock_get_queue',
    text: getQueueSql,
    params: [name, scope.tenant ?? null],
  });
  return row!;
}

/** The settings of every queue that has its own; the others run on the defaults (no cap, weight 1, handlers, running, the default retention, no dead-letter queue). */
export async function listQueueSettings(db: Queryable): Promise<Array<QueueSettings & { name: string }>> {
  return db.query<QueueSettings & { name: string }>({
    name: 'skiplock_list_queue_settings',
    text: listQueueSettingsSql,
    params: [],
  });
}

// Pausing keeps the time it was first paused; resuming tells listening workers, as an enqueue does.
const pauseQueueSql = /* sql */ `
INSERT INTO skiplock.queues AS q (name, paused_at, updated_at) VALUES ($1, now(), now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, now()), updated_at = now()`;

const resumeQueueSql = /* sql */ `
WITH resumed AS (
  UPDATE skiplock.queues SET paused_at = NULL, updated_at = now() WHERE name = $1 AND paused_at IS NOT NULL RETURNING 1
)
SELECT pg_notify('skiplock_jobs', '') FROM resumed WHERE skiplock.anyone_listening()`;

/**
 * Replaces a queue's settings (not whether it is paused). A cap applies from the next claim: jobs
 * already running above a lowered cap finish, and none start until the
 * queue is below it. So does a delivery target: jobs already claimed by a
 * handler finish there, and every later claim sends the queue's jobs to the
 * target (a drain that cannot deliver to it leaves them alone). A delivery
 * left out is none: the queue's jobs go to the handlers of their types. A
 * retention left out is the default; a new one applies to the queue's
 * finished jobs at the next housekeeping, those that finished before it
 * too. A dead-letter queue left out is none. A rate limit left out is none; one set applies from
 * the next claim, counting the starts already in its window. Its `onExcess` (default `throttle`)
 * applies from the next enqueue: with `drop`, a job enqueued while the window has no room ends
 * `cancelled` with a RateLimitedError. A retention under a minute
 * (other than `'none'`), a queue named as its own dead-letter queue, or a rate limit of fewer
 * than 1 start or more than 10,000, a window of under 1 or over 86,400 seconds, or an `onExcess`
 * other than `throttle` or `drop`, is an
 * InvalidInputError naming the field, and nothing changes.
 */
export async function setQueue(
  db: Queryable,
  name: string,
  settings: Pick<QueueSettings, 'concurrency' | 'weight'> & {
    delivery?: DeliveryTarget | null;
    retentionSeconds?: Retention | null;
    deadLetterQueue?: string | null;
    rateLimit?: (RateLimit & { onExcess?: RateOnExcess }) | null;
  },
): Promise<Queue> {
  const retention = settings.retentionSeconds ?? null;
  if (retention !== null) checkRetention(retention, 'retentionSeconds');
  const deadLetterQueue = settings.deadLetterQueue ?? null;
  if (deadLetterQueue === name) {
    throw new InvalidInputError('deadLetterQueue: a queue cannot be its own dead-letter queue', 'deadLetterQueue');
  }
  const rateLimit = settings.rateLimit ?? null;
  if (rateLimit !== null) checkQueueRateLimit(rateLimit);
  await db.query({
    name: 'skiplock_set_queue',
    text: setQueueSql,
    params: [
      name,
      settings.concurrency,
      settings.weight,
      settings.delivery == null ? null : JSON.stringify(settings.delivery),
      retention === 'none' ? 0 : retention,
      deadLetterQueue,
      rateLimit?.count ?? null,
      rateLimit?.perSeconds ?? null,
      rateLimit?.onExcess ?? 'throttle',
    ],
  });
  return getQueue(db, name);
}

function checkQueueRateLimit({ count, perSeconds, onExcess }: RateLimit & { onExcess?: RateOnExcess }): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_QUEUE_RATE_LIMIT) {
    throw new InvalidInputError(
      `rateLimit.count: a whole number of starts from 1 to ${MAX_QUEUE_RATE_LIMIT}, not ${count}`,
      'rateLimit.count',
    );
  }
  if (!Number.isInteger(perSeconds) || perSeconds < 1 || perSeconds > MAX_QUEUE_RATE_SECONDS) {
    throw new InvalidInputError(
      `rateLimit.perSeconds: a window of 1 to ${MAX_QUEUE_RATE_SECONDS} whole seconds, not ${perSeconds}`,
      'rateLimit.perSeconds',
    );
  }
  if (onExcess !== undefined && onExcess !== 'throttle' && onExcess !== 'drop') {
    throw new InvalidInputError(`rateLimit.onExcess: throttle or drop, not ${onExcess}`, 'rateLimit.onExcess');
  }
}

/**
 * Pauses a queue: no claim takes its jobs until it is resumed. Its waiting
 * jobs and its settings stay as they are, and its running jobs finish.
 * Pausing a paused queue changes nothing.
 */
export async function pauseQueue(db: Queryable, name: string): Promise<Queue> {
  await db.query({ name: 'skiplock_pause_queue', text: pauseQueueSql, params: [name] });
  return getQueue(db, name);
}

/** Resumes a paused queue: the next claim may take its jobs (listening workers are told at once). */
export async function resumeQueue(db: Queryable, name: string): Promise<Queue> {
  await db.query({ name: 'skiplock_resume_queue', text: resumeQueueSql, params: [name] });
  return getQueue(db, name);
}
