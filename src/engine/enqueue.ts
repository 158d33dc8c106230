import type { Query, Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { jobHandle, type JobHandle } from './job-handle.js';
import { toJob } from './job-json.js';
import { getJobSql } from './read-jobs.js';
import type { JobType, PayloadOf, ResultOf } from './job-type.js';
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
}

export interface EnqueueResult {
  job: Job;
  /** True when a job of the same tenant and queue held the dedup key; `job` is that job. */
  deduplicated: boolean;
}

/** Everything of an enqueue but the job type and payload, which the job type's form gives. */
export type TypedEnqueueOptions = Omit<EnqueueInput, 'type' | 'payload' | 'queue'> & {
  /** Defaults to the job type's name. */
  queue?: string;
};

export const MAX_BATCH = 1000;

/**
 * One statement enqueues a whole batch (a single job is a batch of one): the
 * jobs arrive as one JSON parameter; the jobs table's insert trigger
 * (jobs_inserted) makes the tenant rows the claim needs on first sight. A job with a dedup key is stored only if it wins its
 * key in skiplock.dedup_keys, whose unique key settles races between
 * concurrent enqueues: a key in force stays with its job (the no-op DO UPDATE
 * returns that job's id even when it committed after this statement's
 * snapshot), a lapsed one (its job finished longer ago than its dedup
 * window) passes to the new job.
 */
const enqueueSql = /* sql */ `
WITH input AS MATERIALIZED (
  -- One clock reading, and the position in the batch: ids in input order.
  SELECT i.ordinal, skiplock.uuid_v7(clock.at, i.ordinal::integer) AS id,
         i.job->>'queue' AS queue,
         coalesce(i.job->>'type', i.job->>'queue') AS type,
         coalesce(i.job->>'tenant', 'default') AS tenant,
         coalesce(i.job->'payload', 'null') AS payload,
         coalesce((i.job->>'priority')::smallint, 0) AS priority,
         coalesce((i.job->>'runAt')::timestamptz,
                  now() + make_interval(secs => coalesce((i.job->>'delaySeconds')::float8, 0))) AS run_at,
         coalesce((i.job->>'maxAttempts')::smallint, 5) AS max_attempts,
         coalesce((i.job->>'leaseSeconds')::integer, 60) AS lease_seconds,
         coalesce((i.job->>'backoffBaseSeconds')::real, 1) AS backoff_base_seconds,
         coalesce((i.job->>'backoffMaxSeconds')::real, 3600) AS backoff_max_seconds,
         coalesce((i.job->>'expiresAt')::timestamptz,
                  now() + make_interval(secs => (i.job->>'ttlSeconds')::float8)) AS expires_at,
         i.job->>'dedupKey' AS dedup_key,
         coalesce((i.job->>'dedupWindowSeconds')::integer, 0) AS dedup_window_seconds,
         i.job->>'callbackUrl' AS callback_url,
         i.job->>'failureCallbackUrl' AS failure_callback_url
  FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(job, ordinal)
  -- OFFSET 0 keeps the planner from copying clock_timestamp() into every use of at.
  CROSS JOIN (SELECT clock_timestamp() AS at OFFSET 0) clock
),
keys AS (
  INSERT INTO skiplock.dedup_keys AS k (tenant, queue, dedup_key, job_id)
  SELECT tenant, queue, dedup_key, id FROM input WHERE dedup_key IS NOT NULL
  ORDER BY ordinal
  ON CONFLICT (tenant, queue, dedup_key) DO UPDATE
    SET job_id = CASE WHEN k.expires_at <= now() THEN EXCLUDED.job_id ELSE k.job_id END,
        expires_at = CASE WHEN k.expires_at <= now() THEN NULL ELSE k.expires_at END
  RETURNING k.tenant, k.queue, k.dedup_key, k.job_id
),
written AS (
  INSERT INTO skiplock.jobs AS j
    (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
     backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
     callback_url, failure_callback_url)
  SELECT id, queue, type, tenant, payload, priority,
         CASE WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
         run_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds,
         expires_at, dedup_key, dedup_window_seconds, callback_url, failure_callback_url
  FROM input
  WHERE dedup_key IS NULL OR id IN (SELECT job_id FROM keys)
  ORDER BY ordinal
  RETURNING j.id, skiplock.job_json(j) AS job
)
-- Each input finds its new row by the id it was given, or else (deduplicated)
-- the job that holds its key: equality joins the planner can hash, and a
-- lookup by id for each dedup hit only.
SELECT coalesce(inserted.job, CASE WHEN key.job_id IS NOT NULL THEN
         (SELECT skiplock.job_json(a) FROM skiplock.all_jobs a WHERE a.id = key.job_id) END) AS job,
       inserted.id IS NULL AS deduplicated, key.job_id AS "heldBy"
FROM input i
LEFT JOIN written inserted ON inserted.id = i.id
LEFT JOIN keys key
  ON inserted.id IS NULL AND key.tenant = i.tenant AND key.queue = i.queue AND key.dedup_key = i.dedup_key
ORDER BY i.ordinal`;

interface EnqueueRow {
  /** Null only for a dedup hit on a job that committed after the statement began: read again. */
  job: Job | null;
  deduplicated: boolean;
  heldBy: string | null;
}

/**
 * The enqueue statement as a query object, for a caller's own transaction:
 * put it in a Neon `sql.transaction([...])` batch
 * (`sql.query(q.text, [...q.params])`) or run it on a pg/Neon client inside
 * BEGIN ... COMMIT. The job exists exactly when the caller's transaction commits.
 */
export function enqueueQuery(jobs: EnqueueInput | readonly EnqueueInput[]): Query {
  const batch = Array.isArray(jobs) ? jobs : [jobs as EnqueueInput];
  checkBatch(batch);
  return { name: 'skiplock_enqueue', text: enqueueSql, params: [JSON.stringify(batch)] };
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
  return results.map(({ job, deduplicated }) => jobHandle(db, job, deduplicated));
}

async function enqueueInputs(db: Queryable, jobs: readonly EnqueueInput[]): Promise<EnqueueResult[]> {
  const rows = await db.query<EnqueueRow>(enqueueQuery(jobs));
  return Promise.all(rows.map(async (row) => ({ job: toJob(row.job ?? (await heldJob(db, row))), deduplicated: row.deduplicated })));
}

/**
 * The job a dedup hit matched, when the enqueue's own snapshot could not see
 * it (a concurrent enqueue committed it meanwhile): a later statement can.
 */
async function heldJob(db: Queryable, row: EnqueueRow): Promise<Job> {
  const [held] = await db.query<{ job: Job }>({ name: 'skiplock_get_job', text: getJobSql, params: [row.heldBy, null] });
  if (held === undefined) throw new Error(`the job holding a dedup key vanished: ${row.heldBy}`);
  return held.job;
}

function checkBatch(jobs: readonly EnqueueInput[]): void {
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
        throw new InvalidInputError(`${field} must be an http or https URL of at most ${MAX_CALLBACK_URL_LENGTH} characters`, `jobs.${index}.${field}`);
      }
    }
    if (job.dedupKey === undefined) return;
    const key = JSON.stringify([job.tenant ?? 'default', job.queue, job.dedupKey]);
    // One statement cannot both insert a key and match it: the caller must decide.
    if (seen.has(key)) throw new InvalidInputError('two jobs of one batch share a dedup key', `jobs.${index}.dedupKey`);
    seen.add(key);
  });
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
      return { ...options, queue: options.queue ?? job.type, type: job.type, payload: payload as Json };
    }),
  );
}
