import type { Query, Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { jobHandle, type JobHandle } from './job-handle.js';
import { toJob } from './job-json.js';
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
}

export interface EnqueueResult {
  job: Job;
  /** True when a job with the same queue, tenant and dedup key already existed; `job` is that job. */
  deduplicated: boolean;
}

/** Everything of an enqueue but the job type and payload, which the job type's form gives. */
export type TypedEnqueueOptions = Omit<EnqueueInput, 'type' | 'payload' | 'queue'> & {
  /** Defaults to the job type's name. */
  queue?: string;
};

export const MAX_BATCH = 1000;

/**
 * One statement enqueues a whole batch (a single job is a batch of one):
 * the jobs arrive as one JSON parameter, the tenant rows the claim needs are
 * made on first sight, the unique dedup index settles races between
 * concurrent enqueues (the loser gets the winner's row back through the no-op
 * DO UPDATE, which also returns rows committed after this statement's
 * snapshot), and every new job gets its `enqueued` event.
 */
const enqueueSql = /* sql */ `
WITH input AS MATERIALIZED (
  SELECT i.ordinal, skiplock.uuid_v7() AS id,
         i.job->>'queue' AS queue,
         coalesce(i.job->>'type', i.job->>'queue') AS type,
         coalesce(i.job->>'tenant', 'default') AS tenant,
         coalesce(i.job->'payload', 'null') AS payload,
         coalesce((i.job->>'priority')::integer, 0) AS priority,
         coalesce((i.job->>'runAt')::timestamptz,
                  now() + make_interval(secs => coalesce((i.job->>'delaySeconds')::float8, 0))) AS run_at,
         coalesce((i.job->>'maxAttempts')::integer, 5) AS max_attempts,
         coalesce((i.job->>'leaseSeconds')::integer, 60) AS lease_seconds,
         coalesce((i.job->>'backoffBaseSeconds')::real, 1) AS backoff_base_seconds,
         coalesce((i.job->>'backoffMaxSeconds')::real, 3600) AS backoff_max_seconds,
         coalesce((i.job->>'expiresAt')::timestamptz,
                  now() + make_interval(secs => (i.job->>'ttlSeconds')::float8)) AS expires_at,
         i.job->>'dedupKey' AS dedup_key,
         coalesce((i.job->>'dedupWindowSeconds')::integer, 0) AS dedup_window_seconds
  FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(job, ordinal)
),
new_tenants AS (
  INSERT INTO skiplock.tenants (name)
  SELECT DISTINCT tenant FROM input
  ON CONFLICT (name) DO NOTHING
),
written AS (
  INSERT INTO skiplock.jobs AS j
    (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
     backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds)
  SELECT id, queue, type, tenant, payload, priority,
         CASE WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
         run_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds,
         expires_at, dedup_key, dedup_window_seconds
  FROM input
  ORDER BY ordinal
  -- Dedup keys are per tenant (migration 0008, jobs_tenant_dedup_idx): the
  -- conflict target and the match below both take the tenant.
  ON CONFLICT (queue, tenant, dedup_key) WHERE dedup_key IS NOT NULL
    DO UPDATE SET dedup_key = EXCLUDED.dedup_key
  RETURNING j.id, j.queue, j.tenant, j.dedup_key, skiplock.job_json(j) AS job,
            j.finished_at IS NOT NULL
              AND j.finished_at + make_interval(secs => j.dedup_window_seconds) <= now() AS dedup_lapsed
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt)
  SELECT w.id, 'enqueued', 0 FROM written w JOIN input USING (id)
)
-- Each input finds its row by the id it was given, or else (deduplicated) by
-- its dedup key: two equality joins, each hashed. One join on either
-- condition cannot be hashed and compares every pair (180 ms for 1,000).
SELECT coalesce(inserted.job, matched.job) AS job,
       inserted.id IS NULL AS deduplicated,
       coalesce(inserted.dedup_lapsed, matched.dedup_lapsed) AS dedup_lapsed
FROM input i
LEFT JOIN written inserted ON inserted.id = i.id
LEFT JOIN written matched
  ON inserted.id IS NULL AND matched.queue = i.queue AND matched.tenant = i.tenant AND matched.dedup_key = i.dedup_key
ORDER BY i.ordinal`;

/**
 * A finished job whose dedup window has passed keeps its key until the
 * maintenance sweep clears it; an enqueue that meets such a key clears it
 * itself, so the window is exact.
 */
const releaseDedupKeysSql = /* sql */ `
UPDATE skiplock.jobs SET dedup_key = NULL
WHERE id = ANY($1::uuid[])
  AND finished_at IS NOT NULL
  AND finished_at + make_interval(secs => dedup_window_seconds) <= now()`;

interface EnqueueRow {
  job: Job;
  deduplicated: boolean;
  dedup_lapsed: boolean;
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
  const lapsed = rows.filter((row) => row.deduplicated && row.dedup_lapsed);
  if (lapsed.length === 0) return rows.map(toResult);
  // Rare: a finished job's dedup window ran out and no sweep has cleared its key yet.
  await db.query({
    name: 'skiplock_release_dedup_keys',
    text: releaseDedupKeysSql,
    params: [lapsed.map((row) => row.job.id)],
  });
  const again = await db.query<EnqueueRow>(enqueueQuery(jobs.filter((_, i) => rows[i]!.dedup_lapsed)));
  let next = 0;
  return rows.map((row) => (row.dedup_lapsed ? toResult(again[next++]!) : toResult(row)));
}

function toResult(row: EnqueueRow): EnqueueResult {
  return { job: toJob(row.job), deduplicated: row.deduplicated };
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
    if (job.dedupKey === undefined) return;
    const key = JSON.stringify([job.queue, job.tenant ?? 'default', job.dedupKey]);
    // One statement cannot both insert a key and match it: the caller must decide.
    if (seen.has(key)) throw new InvalidInputError('two jobs of one batch share a dedup key', `jobs.${index}.dedupKey`);
    seen.add(key);
  });
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
