import { DatabaseError } from '../db/errors.js';
import type { Query, Queryable } from '../db/types.js';
import { DedupConflictError, InvalidInputError } from './errors.js';
import { jobHandle, type JobHandle } from './job-handle.js';
import { toJob } from './job-json.js';
import { getJobSql } from './read-jobs.js';
import { jobTags } from './tags.js';
import { traceparentProblem, tracestateProblem } from './trace-context.js';
import { typeInput, type JobType, type PayloadOf, type ResultOf } from './job-type.js';
import type { Job, Json } from './types.js';

export interface EnqueueInput {
  queue: string;
  /** Handler name; defaults to the queue. */
  type?: string;
  tenant?: string;
  payload?: Json;
  /** Higher runs first within a queue and tenant. -1000..1000, default 0. */
  priority?: number;
  /** Not before this time (ISO-8601 or Date). Exclusive with delaySeconds. */
  runAt?: string | Date;
  delaySeconds?: number;
  maxAttempts?: number;
  /** The per-attempt timeout: how long a claim owns the job without a heartbeat. */
  leaseSeconds?: number;
  /** Expire, never run, if not started by then. Exclusive with ttlSeconds. */
  expiresAt?: string | Date;
  ttlSeconds?: number;
  dedupKey?: string;
  /** How long after the job finishes its dedup key still matches. Default 0. */
  dedupWindowSeconds?: number;
  /**
   * What this enqueue does when a job holds its dedupKey: `return` that job
   * (the default), `replace` its payload (and its run time, when runAt or
   * delaySeconds is given) while it has not started, or `refuse`
   * (DedupConflictError). A job that has started cannot be replaced: the
   * enqueue is refused, unless the scope is `waiting`, where it does not count.
   */
  dedupOnConflict?: DedupOnConflict;
  /**
   * Which job holds a dedup key: `waitingOrRunning` (the default) while it
   * waits, runs, and for its dedup window after it ends; `waiting` only
   * until it starts, so a new job may wait while one runs.
   */
  dedupScope?: DedupScope;
  /**
   * Debounce: while a job of the tenant and queue with this key has not
   * started, an enqueue with the key replaces its payload and moves its start
   * to `debouncePeriodSeconds` from now (never past its first enqueue plus
   * `debounceMaxDelaySeconds`) instead of adding a job; once it has started,
   * the next enqueue begins a new job. Stored as the job's dedup key, so
   * exclusive with dedupKey, orderingKey, runAt and delaySeconds.
   */
  debounceKey?: string;
  /** Whole seconds from the latest enqueue of the key to the job's start: 1 or more. */
  debouncePeriodSeconds?: number;
  /** The job starts at the latest this long after the burst's first enqueue: at least the period. */
  debounceMaxDelaySeconds?: number;
  /** Retry backoff: full jitter over min(max, base * 2^(attempt-1)) seconds. */
  backoffBaseSeconds?: number;
  backoffMaxSeconds?: number;
  /**
   * Announces a success to this http(s) URL: a signed Standard Webhooks POST
   * by the built-in `http` job (queue skiplock.callbacks), allow-list rules and all.
   */
  callbackUrl?: string;
  /** Announces a failure, cancellation or expiry to this http(s) URL, as callbackUrl does a success. */
  failureCallbackUrl?: string;
  /**
   * At most `concurrencyLimit` jobs of the tenant with this key are past
   * their turn (waiting to start, running, retrying or parked) at once; the
   * others wait, held, and take the slots that free in enqueue order.
   * Exclusive with orderingKey.
   */
  concurrencyKey?: string;
  /** The key's slots, 1 to 1,000 (default 1): the latest job's number is the key's. */
  concurrencyLimit?: number;
  /**
   * The tenant's jobs with this key run one at a time, in enqueue order; a
   * job that retries keeps the others waiting. Exclusive with concurrencyKey.
   */
  orderingKey?: string;
  /**
   * When the key's head fails for good (or expires): `hold` (the default)
   * keeps the rest waiting until the head is retried or the key unblocked
   * (`unblockKey`); `continue` lets the next one run.
   */
  orderingOnFailure?: OrderingOnFailure;
  /**
   * At most `rateLimit` of the tenant's jobs with this key start in any
   * `ratePeriodSeconds` seconds, every attempt counted, however many
   * workers claim at once. Exclusive with concurrencyKey and orderingKey.
   */
  rateKey?: string;
  /** Starts per period, 1 to 10,000; with a rateKey, required. The latest job's numbers are the key's. */
  rateLimit?: number;
  /** The period, 1 to 86,400 seconds; with a rateKey, required. */
  ratePeriodSeconds?: number;
  /**
   * A job beyond the limit: `throttle` (the default) holds it until the
   * window has room; `drop` ends it cancelled at enqueue, saying why.
   */
  rateOnExcess?: RateOnExcess;
  /**
   * Up to 16 tags, each 1 to 64 characters of A-Z a-z 0-9 _ . : / = -
   * starting with a letter or digit (`env=prod`, `customer:42`): kept once
   * each, after the job definition's own, for the job list and bulk actions to filter by.
   */
  tags?: readonly string[];
  /**
   * W3C trace context of what enqueues the job (its span's `traceparent`):
   * kept with the job, so a drain that traces runs each attempt in a span of
   * that trace. `activeTraceContext()` of `skiplock/otel` gives the caller's.
   */
  traceparent?: string;
  /** The `tracestate` that goes with `traceparent`, at most 512 characters. */
  tracestate?: string;
}

/** What an ordering key's later jobs do when its head fails for good. */
export type OrderingOnFailure = 'hold' | 'continue';

/** What a rate key does with a job beyond its limit. */
export type RateOnExcess = 'throttle' | 'drop';

/** What an enqueue does when a job holds its dedup key. */
export type DedupOnConflict = 'return' | 'replace' | 'refuse';

/** Which job holds a dedup key: until it ends (and its window), or until it starts. */
export type DedupScope = 'waitingOrRunning' | 'waiting';

/** The key fields of an enqueue, as a job definition derives them from a payload. */
export type JobKeys = Pick<
  EnqueueInput,
  | 'concurrencyKey'
  | 'concurrencyLimit'
  | 'orderingKey'
  | 'orderingOnFailure'
  | 'rateKey'
  | 'rateLimit'
  | 'ratePeriodSeconds'
  | 'rateOnExcess'
  | 'dedupKey'
  | 'dedupWindowSeconds'
  | 'dedupOnConflict'
  | 'dedupScope'
  | 'debounceKey'
  | 'debouncePeriodSeconds'
  | 'debounceMaxDelaySeconds'
>;

/** Every key field of an enqueue. */
export const JOB_KEY_FIELDS = [
  'concurrencyKey',
  'concurrencyLimit',
  'orderingKey',
  'orderingOnFailure',
  'rateKey',
  'rateLimit',
  'ratePeriodSeconds',
  'rateOnExcess',
  'dedupKey',
  'dedupWindowSeconds',
  'dedupOnConflict',
  'dedupScope',
  'debounceKey',
  'debouncePeriodSeconds',
  'debounceMaxDelaySeconds',
] as const satisfies readonly (keyof JobKeys)[];

/** The longest concurrency, ordering, rate, dedup or debounce key. */
export const MAX_KEY_LENGTH = 256;

export interface EnqueueResult {
  job: Job;
  /** True when a job of the same tenant and queue held the dedup (or debounce) key; `job` is that job. */
  deduplicated: boolean;
  /** True when this enqueue debounced that job: its payload is this one's, its start moved. */
  debounced: boolean;
  /** True when this enqueue replaced that job's payload (dedupOnConflict `replace`). */
  replaced: boolean;
}

/** Everything of an enqueue but the job type and payload, which the job type's form gives. */
export type TypedEnqueueOptions = Omit<EnqueueInput, 'type' | 'payload' | 'queue'> & {
  /** Defaults to the job type's name. */
  queue?: string;
};

export const MAX_BATCH = 1000;

/**
 * One statement enqueues a whole batch (a single job is a batch of one):
 * skiplock.enqueue_jobs in migrations/0001_schema.sql, a function so its
 * plan is kept per connection whichever driver sends it (planning the
 * statement cost more than running it for a single job, and over Neon's
 * HTTP driver nothing is prepared).
 */
// Whether each job's queue drops its rate limit's excess: its insert trigger may have ended the job
// cancelled after its row came back. A hashed list of the few such queues, read once.
export const QUEUE_DROPS = `e.queue IN (SELECT q.name FROM skiplock.queues q WHERE q.rate_mode = 'drop')`;

const enqueueSql = /* sql */ `SELECT e.*, ${QUEUE_DROPS} AS "queueDrops" FROM skiplock.enqueue_jobs($1::jsonb) e`;

/**
 * The same, for a batch with trace contexts: each new job's context goes in
 * skiplock.job_trace_contexts in the same statement (so in the caller's
 * transaction too). A job the enqueue matched (deduplicated, debounced,
 * replaced) keeps the context it has. The function's answers come in input
 * order, which ORDINALITY numbers.
 */
/** Keeps the trace context of each new job of the `enqueued` CTE, whose jobs are `$1`, in input order. */
export const KEEP_TRACE_CONTEXTS = /* sql */ `
traced AS (
  INSERT INTO skiplock.job_trace_contexts (job_id, traceparent, tracestate)
  SELECT e.id, i.job->>'traceparent', i.job->>'tracestate'
  FROM enqueued e
  JOIN jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(job, ordinal) ON i.ordinal = e.ordinality
  WHERE NOT e.deduplicated AND i.job ? 'traceparent'
)`;

const tracedEnqueueSql = /* sql */ `
WITH enqueued AS MATERIALIZED (
  SELECT * FROM skiplock.enqueue_jobs($1::jsonb) WITH ORDINALITY AS e
),${KEEP_TRACE_CONTEXTS}
SELECT e.*, ${QUEUE_DROPS} AS "queueDrops" FROM enqueued e ORDER BY ordinality`;

/** What skiplock.enqueued_job gives of a new job: the columns its insert set. */
type EnqueuedColumns = Pick<
  Job,
  | 'id'
  | 'queue'
  | 'type'
  | 'tenant'
  | 'status'
  | 'priority'
  | 'payload'
  | 'maxAttempts'
  | 'leaseSeconds'
  | 'runAt'
  | 'expiresAt'
  | 'dedupKey'
  | 'createdAt'
  | 'callbackUrl'
  | 'failureCallbackUrl'
>;

/** A row of skiplock.enqueue_jobs: the new job's columns, or (deduplicated) nulls and the job holding the key. */
export type EnqueueRow = EnqueuedColumns & {
  deduplicated: boolean;
  debounced: boolean;
  replaced: boolean;
  heldBy: string | null;
  /** Null for a new job, and for a dedup hit on a job that committed after the statement began: read again. */
  heldJob: Job | null;
  /** The job's queue drops the excess of its rate limit. */
  queueDrops: boolean;
};

/**
 * The enqueue statement as a query object, for a caller's own transaction:
 * put it in a Neon `sql.transaction([...])` batch
 * (`sql.query(q.text, [...q.params])`) or run it on a pg/Neon client inside
 * BEGIN ... COMMIT. The job exists exactly when the caller's transaction commits.
 */
export function enqueueQuery(jobs: EnqueueInput | readonly EnqueueInput[]): Query {
  const batch = Array.isArray(jobs) ? jobs : [jobs as EnqueueInput];
  const params = [enqueueJobsJson(batch)];
  if (isTraced(batch)) return { name: 'skiplock_enqueue_traced', text: tracedEnqueueSql, params };
  return { name: 'skiplock_enqueue', text: enqueueSql, params };
}

/** The jobs as skiplock.enqueue_jobs takes them, once checked: a JSON array. */
export function enqueueJobsJson(batch: readonly EnqueueInput[]): string {
  checkBatch(batch);
  // Each tag once, as stored: skiplock.enqueue_rows takes them as sent.
  const stored = batch.map((job, index) =>
    job.tags === undefined ? job : { ...job, tags: jobTags(job.tags, `jobs.${index}.tags`) },
  );
  return JSON.stringify(stored);
}

/** Whether a job of the batch keeps a trace context, which the traced statements store. */
export function isTraced(batch: readonly EnqueueInput[]): boolean {
  return batch.some((job) => job.traceparent !== undefined);
}

/**
 * Enqueues one job. Through a caller's client (see `clientQueryable`) it joins the caller's transaction.
 *
 * Given a job type (from `defineJob`), the payload is type-checked against
 * its schema at compile time and checked again before it is stored, and the
 * answer is a handle whose `result()` is typed by the handler's return type.
 * The job goes to the queue named like its type unless `options.queue` says otherwise.
 */
export async function enqueue(db: Queryable, job: EnqueueInput): Promise<EnqueueResult>;
export async function enqueue<J extends JobType>(
  db: Queryable,
  job: J,
  payload: PayloadOf<J>,
  options?: TypedEnqueueOptions,
): Promise<JobHandle<ResultOf<J>>>;
export async function enqueue(
  db: Queryable,
  job: EnqueueInput | JobType,
  payload?: unknown,
  options: TypedEnqueueOptions = {},
): Promise<EnqueueResult | JobHandle> {
  if (isJobType(job)) {
    const [handle] = await enqueueBatch(db, job, [payload], options);
    return handle!;
  }
  const [result] = await enqueueBatch(db, [job]);
  return result!;
}

/** Enqueues up to 1,000 jobs in one statement: all or none. Results are in input order. */
export async function enqueueBatch(db: Queryable, jobs: readonly EnqueueInput[]): Promise<EnqueueResult[]>;
export async function enqueueBatch<J extends JobType>(
  db: Queryable,
  job: J,
  payloads: readonly PayloadOf<J>[],
  options?: TypedEnqueueOptions,
): Promise<JobHandle<ResultOf<J>>[]>;
export async function enqueueBatch(
  db: Queryable,
  jobs: readonly EnqueueInput[] | JobType,
  payloads: readonly unknown[] = [],
  options: TypedEnqueueOptions = {},
): Promise<EnqueueResult[] | JobHandle[]> {
  if (!isJobType(jobs)) return enqueueInputs(db, jobs);
  const inputs = await typedInputs(jobs, payloads, options);
  const results = await enqueueInputs(db, inputs);
  return results.map(({ job, ...outcome }) => jobHandle(db, job, outcome));
}

async function enqueueInputs(db: Queryable, jobs: readonly EnqueueInput[]): Promise<EnqueueResult[]> {
  const rows = await db.query<EnqueueRow>(enqueueQuery(jobs)).catch((error: unknown) => {
    throw enqueueRefusal(error);
  });
  return enqueueResults(db, jobs, rows);
}

/** The database's refusal of an enqueue as the engine's error for it; any other error as it is. */
export function enqueueRefusal(error: unknown): unknown {
  return keyKindConflict(error) ?? dedupConflict(error) ?? error;
}

/** The results of the rows an enqueue statement answered for `jobs`, in input order. */
export async function enqueueResults(
  db: Queryable,
  jobs: readonly EnqueueInput[],
  rows: readonly EnqueueRow[],
): Promise<EnqueueResult[]> {
  return Promise.all(
    rows.map(async ({ deduplicated, debounced, replaced, queueDrops, ...row }, index) => {
      // A drop key's or a dropping queue's job may have ended cancelled in the statement's own trigger,
      // after its row came back.
      const reread = deduplicated || queueDrops || jobs[index]!.rateOnExcess === 'drop';
      const job = reread
        ? toJob(row.heldJob ?? (await readJob(db, deduplicated ? row.heldBy! : row.id)))
        : enqueuedJob(row, jobTags(jobs[index]!.tags ?? [], `jobs.${index}.tags`));
      return { job, deduplicated, debounced, replaced };
    }),
  );
}

/** A job just enqueued: its columns, and what every new job has (no attempt yet), written out in the one shape all jobs share. */
function enqueuedJob(row: EnqueuedColumns, tags: string[]): Job {
  return toJob({
    id: row.id,
    queue: row.queue,
    type: row.type,
    tenant: row.tenant,
    status: row.status,
    priority: row.priority,
    payload: row.payload,
    attempts: 0,
    maxAttempts: row.maxAttempts,
    leaseSeconds: row.leaseSeconds,
    runAt: row.runAt,
    expiresAt: row.expiresAt,
    dedupKey: row.dedupKey,
    createdAt: row.createdAt,
    firstStartedAt: null,
    startedAt: null,
    finishedAt: null,
    durationMs: null,
    leaseExpiresAt: null,
    workerId: null,
    cancelRequested: false,
    progress: null,
    result: null,
    lastError: null,
    callbackUrl: row.callbackUrl,
    failureCallbackUrl: row.failureCallbackUrl,
    runMs: 0,
    tags,
  });
}

/**
 * A job as a statement after the enqueue sees it: the job a dedup hit
 * matched, when the enqueue's own snapshot could not see it (a concurrent
 * enqueue committed it meanwhile), or a job the enqueue's trigger changed.
 */
async function readJob(db: Queryable, id: string): Promise<Job> {
  const [read] = await db.query<{ job: Job }>({
    name: 'skiplock_get_job',
    text: getJobSql,
    params: [id, null],
  });
  if (read === undefined) throw new Error(`a job just enqueued or matched vanished: ${id}`);
  return read.job;
}

/** The database's field names of the keys, by kind. */
const KEY_FIELDS = { concurrency_key: 'concurrencyKey', ordering_key: 'orderingKey', rate_key: 'rateKey' } as const;

/**
 * The database's refusal of a key named as another kind (a concurrency key
 * in use as an ordering or rate key, say), as the input error it is.
 */
function keyKindConflict(error: unknown): InvalidInputError | undefined {
  if (!(error instanceof DatabaseError) || error.code !== '22023') return undefined;
  const refused = /^(concurrency_key|ordering_key|rate_key): (.*)$/s.exec(error.message);
  if (refused === null) return undefined;
  const field = KEY_FIELDS[refused[1] as keyof typeof KEY_FIELDS];
  return new InvalidInputError(`${field}: ${refused[2]}`, field);
}

/**
 * The database's refusal of a dedup key's job (dedupOnConflict `refuse`, or
 * `replace` of a job that has started), naming that job.
 */
function dedupConflict(error: unknown): DedupConflictError | undefined {
  if (!(error instanceof DatabaseError) || error.code !== '23505' || error.constraint !== 'dedup_keys_pkey') {
    return undefined;
  }
  if (error.detail === undefined || !error.message.startsWith('dedup_key: ')) return undefined;
  return new DedupConflictError(error.detail, error.message.slice('dedup_key: '.length));
}

export function checkBatch(jobs: readonly EnqueueInput[]): void {
  if (jobs.length === 0) throw new InvalidInputError('a batch needs at least one job', 'jobs');
  if (jobs.length > MAX_BATCH) throw new InvalidInputError(`a batch holds at most ${MAX_BATCH} jobs`, 'jobs');
  const seen = new Set<string>();
  jobs.forEach((job, index) => {
    if (job.runAt !== undefined && job.delaySeconds !== undefined) {
      throw new InvalidInputError('give runAt or delaySeconds, not both', `jobs.${index}.runAt`);
    }
    if (job.expiresAt !== undefined && job.ttlSeconds !== undefined) {
      throw new InvalidInputError('give expiresAt or ttlSeconds, not both', `jobs.${index}.expiresAt`);
    }
    for (const field of ['callbackUrl', 'failureCallbackUrl'] as const) {
      const url = job[field];
      if (url !== undefined && !isCallbackUrl(url)) {
        throw new InvalidInputError(
          `${field} must be an http or https URL of at most ${MAX_CALLBACK_URL_LENGTH} characters`,
          `jobs.${index}.${field}`,
        );
      }
    }
    checkKeys(job, `jobs.${index}`);
    if (job.tags !== undefined) jobTags(job.tags, `jobs.${index}.tags`);
    checkTraceContext(job, `jobs.${index}`);
    if (job.debounceKey !== undefined && (job.runAt !== undefined || job.delaySeconds !== undefined)) {
      throw new InvalidInputError(
        'debounceKey cannot combine with runAt or delaySeconds: the debounce period sets the start',
        `jobs.${index}.debounceKey`,
      );
    }
    if (job.dedupKey === undefined) return;
    const key = JSON.stringify([job.tenant ?? 'default', job.queue, job.dedupKey]);
    // One statement cannot both insert a key and match it: the caller must decide.
    if (seen.has(key)) throw new InvalidInputError('two jobs of one batch share a dedup key', `jobs.${index}.dedupKey`);
    seen.add(key);
  });
}

/** Refuses key fields that mean nothing together or out of range, naming the field. */
export function checkKeys(job: JobKeys, at: string): void {
  const refuse = (field: keyof JobKeys, problem: string): never => {
    throw new InvalidInputError(`${field} ${problem}`, `${at}.${field}`);
  };
  if (job.concurrencyKey !== undefined && job.orderingKey !== undefined) {
    refuse('orderingKey', 'and concurrencyKey cannot both be given: an ordering key is a key of one slot');
  }
  if (job.rateKey !== undefined && (job.concurrencyKey !== undefined || job.orderingKey !== undefined)) {
    refuse('rateKey', 'cannot be given with a concurrencyKey or an orderingKey: a job names one key');
  }
  for (const field of ['concurrencyKey', 'orderingKey', 'rateKey'] as const) {
    const key = job[field];
    if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > MAX_KEY_LENGTH)) {
      refuse(field, `must be a string of 1 to ${MAX_KEY_LENGTH} characters`);
    }
  }
  const limit = job.concurrencyLimit;
  if (limit !== undefined) {
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= 1000))
      refuse('concurrencyLimit', 'must be an integer from 1 to 1000');
    if (job.concurrencyKey === undefined) refuse('concurrencyLimit', 'needs a concurrencyKey');
  }
  const onFailure = job.orderingOnFailure;
  if (onFailure !== undefined) {
    if (onFailure !== 'hold' && onFailure !== 'continue') refuse('orderingOnFailure', 'must be hold or continue');
    if (job.orderingKey === undefined) refuse('orderingOnFailure', 'needs an orderingKey');
  }
  checkRate(job, refuse);
  checkDedupRules(job, refuse);
  checkDebounce(job, refuse);
}

/** Refuses a trace context that is not W3C's, naming the field. */
function checkTraceContext(job: EnqueueInput, at: string): void {
  if (job.traceparent !== undefined) {
    const problem = traceparentProblem(job.traceparent);
    if (problem !== undefined) throw new InvalidInputError(`traceparent ${problem}`, `${at}.traceparent`);
  }
  if (job.tracestate !== undefined) {
    if (job.traceparent === undefined) {
      throw new InvalidInputError('tracestate needs a traceparent', `${at}.tracestate`);
    }
    const problem = tracestateProblem(job.tracestate);
    if (problem !== undefined) throw new InvalidInputError(`tracestate ${problem}`, `${at}.tracestate`);
  }
}

/** The longest rate period: a day. */
export const MAX_RATE_PERIOD_SECONDS = 86_400;
/** The most starts a rate key allows per period. */
export const MAX_RATE_LIMIT = 10_000;

function checkRate(job: JobKeys, refuse: (field: keyof JobKeys, problem: string) => never): void {
  const { rateKey, rateLimit, ratePeriodSeconds, rateOnExcess } = job;
  if (rateLimit !== undefined && !(Number.isInteger(rateLimit) && rateLimit >= 1 && rateLimit <= MAX_RATE_LIMIT)) {
    refuse('rateLimit', `must be an integer from 1 to ${MAX_RATE_LIMIT}`);
  }
  if (
    ratePeriodSeconds !== undefined &&
    !(Number.isInteger(ratePeriodSeconds) && ratePeriodSeconds >= 1 && ratePeriodSeconds <= MAX_RATE_PERIOD_SECONDS)
  ) {
    refuse('ratePeriodSeconds', `must be a whole number of seconds from 1 to ${MAX_RATE_PERIOD_SECONDS}`);
  }
  if (rateOnExcess !== undefined && rateOnExcess !== 'throttle' && rateOnExcess !== 'drop') {
    refuse('rateOnExcess', 'must be throttle or drop');
  }
  if (rateKey === undefined) {
    for (const field of ['rateLimit', 'ratePeriodSeconds', 'rateOnExcess'] as const) {
      if (job[field] !== undefined) refuse(field, 'needs a rateKey');
    }
  } else {
    if (rateLimit === undefined) refuse('rateLimit', 'is required with a rateKey');
    if (ratePeriodSeconds === undefined) refuse('ratePeriodSeconds', 'is required with a rateKey');
  }
}

function checkDedupRules(job: JobKeys, refuse: (field: keyof JobKeys, problem: string) => never): void {
  const { dedupOnConflict, dedupScope } = job;
  if (dedupOnConflict !== undefined) {
    if (!['return', 'replace', 'refuse'].includes(dedupOnConflict)) {
      refuse('dedupOnConflict', 'must be return, replace or refuse');
    }
    if (job.dedupKey === undefined) refuse('dedupOnConflict', 'needs a dedupKey');
  }
  if (dedupScope !== undefined) {
    if (dedupScope !== 'waiting' && dedupScope !== 'waitingOrRunning') {
      refuse('dedupScope', 'must be waiting or waitingOrRunning');
    }
    if (job.dedupKey === undefined) refuse('dedupScope', 'needs a dedupKey');
    if (dedupScope === 'waiting' && (job.dedupWindowSeconds ?? 0) > 0) {
      refuse('dedupWindowSeconds', 'must be 0 with the waiting scope, which never counts an ended job');
    }
  }
}

/** The longest debounce period or delay: ten years, as the longest delay. */
const MAX_DEBOUNCE_SECONDS = 315_360_000;

function checkDebounce(job: JobKeys, refuse: (field: keyof JobKeys, problem: string) => never): void {
  const { debounceKey, debouncePeriodSeconds: period, debounceMaxDelaySeconds: maxDelay } = job;
  const seconds = (value: number, from: number) =>
    Number.isInteger(value) && value >= from && value <= MAX_DEBOUNCE_SECONDS;
  if (debounceKey === undefined) {
    if (period !== undefined) refuse('debouncePeriodSeconds', 'needs a debounceKey');
    if (maxDelay !== undefined) refuse('debounceMaxDelaySeconds', 'needs a debounceKey');
    return;
  }
  if (typeof debounceKey !== 'string' || debounceKey.length < 1 || debounceKey.length > MAX_KEY_LENGTH) {
    refuse('debounceKey', `must be a string of 1 to ${MAX_KEY_LENGTH} characters`);
  }
  const dedupField = (['dedupKey', 'dedupOnConflict', 'dedupScope', 'dedupWindowSeconds'] as const).find(
    (field) => job[field] !== undefined,
  );
  if (dedupField !== undefined) refuse(dedupField, 'must be left out with a debounceKey, which is the dedup key');
  if (job.orderingKey !== undefined) {
    refuse('orderingKey', 'cannot combine with a debounceKey: debounce folds jobs into one, an ordering key runs each');
  }
  if (period === undefined || !seconds(period, 1)) {
    refuse('debouncePeriodSeconds', `must be a whole number of seconds from 1 to ${MAX_DEBOUNCE_SECONDS}`);
  }
  if (maxDelay !== undefined && !seconds(maxDelay, period)) {
    refuse('debounceMaxDelaySeconds', `must be a whole number of seconds from the period (${period}) up`);
  }
}

/** The longest callback URL stored (the jobs table's check constraints say the same). */
export const MAX_CALLBACK_URL_LENGTH = 2048;

function isCallbackUrl(text: string): boolean {
  if (text.length > MAX_CALLBACK_URL_LENGTH || !/^https?:\/\/[^\s/?#]/i.test(text)) return false;
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

function isJobType(value: EnqueueInput | readonly EnqueueInput[] | JobType): value is JobType {
  return typeof (value as Partial<JobType>).checkPayload === 'function';
}

/** Checks each payload against its job type's schema, naming the first failing field, before anything is stored. */
async function typedInputs(
  job: JobType,
  payloads: readonly unknown[],
  options: TypedEnqueueOptions,
): Promise<EnqueueInput[]> {
  const single = payloads.length === 1;
  return Promise.all(
    payloads.map(async (payload, index) => {
      const [issue] = await job.checkPayload(payload);
      if (issue !== undefined) {
        const field = ['payload', issue.path].filter((part) => part !== '').join('.');
        const where = single ? field : `jobs.${index}.${field}`;
        throw new InvalidInputError(`${job.type}: ${where}: ${issue.message}`, where);
      }
      return typeInput(job, payload, {
        ...options,
        queue: options.queue ?? job.type,
        type: job.type,
        payload: payload as Json,
      });
    }),
  );
}
