import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { toJob } from './job-json.js';
import type { ClaimedJob, DeliveryTarget } from './types.js';

export interface ClaimOptions {
  /** At most this many jobs; the statement can never return more. */
  max: number;
  /** Lease length; the job's own leaseSeconds when left out. */
  leaseSeconds?: number;
  /** Recorded on the job and its events; `releaseWorker` hands back all of a worker's jobs. */
  workerId: string;
  /** Only jobs of these types (the handlers this worker has); all types when left out. */
  types?: readonly string[];
  queues?: readonly string[];
  /**
   * The delivery targets this claimer delivers to: it also takes the jobs,
   * of any type, of queues delivered to one of them. Jobs of a queue with a
   * delivery target go to no other claimer.
   */
  deliveryTargets?: readonly DeliveryTarget['target'][];
  /** Only this tenant's jobs (a tenant-bound pull worker). */
  tenant?: string;
  /**
   * Also read each job's trace context (kept from its enqueue) into
   * `traceContext`: a claimer that traces. Without it the claim reads no more than before.
   */
  traceContexts?: boolean;
}

export const MAX_CLAIM = 1000;

/** The claim lives in the database (skiplock.claim_batch), which keeps its plans per connection. */
const claimBatchSql = /* sql */ `SELECT * FROM skiplock.claim_batch($1, $2, $3, $4, $5, $6, $7)`;

/**
 * The claim, with each job's trace context (skiplock.job_trace_contexts)
 * when it has one, in claim order. Read by skiplock.trace_contexts_of
 * (migrations/0017_trace_links.sql) once the claim has answered: a join
 * here would read with the statement's snapshot, older than the claim's,
 * and miss the context of a job committed in between.
 */
const tracedClaimBatchSql = /* sql */ `
WITH claimed AS MATERIALIZED (
  SELECT * FROM skiplock.claim_batch($1, $2, $3, $4, $5, $6, $7) WITH ORDINALITY
)
SELECT c.*, t.traceparent, t.tracestate
FROM claimed c
LEFT JOIN skiplock.trace_contexts_of(ARRAY(SELECT id FROM claimed)) t ON t.job_id = c.id
ORDER BY c.ordinality`;

/** A row of skiplock.claim_batch: the job's own columns (skiplock.claimed_job). */
type ClaimedRow = Omit<
  ClaimedJob,
  'status' | 'workerId' | 'cancelRequested' | 'finishedAt' | 'durationMs' | 'result' | 'delivery' | 'traceContext'
> & {
  delivery: DeliveryTarget | null;
  /** With `traceContexts` only. */
  traceparent?: string | null;
  tracestate?: string | null;
  /** The job's place in the claim's order, from 1: the rows come back unordered. */
  position: number;
};

/**
 * Claims up to `max` ready jobs in one statement, fairly across tenants and
 * within every tenant's limits (how: skiplock.claim_batch in migrations/0001_schema.sql).
 * Each job comes with the fencing token its worker must present; the jobs
 * are in claim order (highest priority first, then fairness's turns).
 */
export async function claimBatch(db: Queryable, options: ClaimOptions): Promise<ClaimedJob[]> {
  if (!Number.isInteger(options.max) || options.max < 1 || options.max > MAX_CLAIM) {
    throw new InvalidInputError(`max must be an integer from 1 to ${MAX_CLAIM}`, 'max');
  }
  if (options.types?.length === 0 && !options.deliveryTargets?.length) return [];
  const rows = await db.query<ClaimedRow>({
    ...(options.traceContexts
      ? { name: 'skiplock_claim_batch_traced', text: tracedClaimBatchSql }
      : { name: 'skiplock_claim_batch', text: claimBatchSql }),
    params: [
      options.max,
      options.leaseSeconds ?? null,
      options.types ?? null,
      options.queues ?? null,
      options.tenant ?? null,
      options.workerId,
      options.deliveryTargets ?? null,
    ],
  });
  return rows.sort((a, b) => a.position - b.position).map((row) => claimedJob(row, options.workerId));
}

/**
 * Plans the claim on one connection of `db` without claiming anything
 * (skiplock.prepare_claims), so the first claim there that finds a job is as
 * quick as the rest. For connections kept for claiming: a connection that
 * answers an idle worker's pickup should not make it wait for planning.
 */
export async function prepareClaims(db: Queryable): Promise<void> {
  await db.query({ name: 'skiplock_prepare_claims', text: 'SELECT skiplock.prepare_claims()', params: [] });
}

/** A claimed row as the full job, every field written out so all jobs share one shape (and one hidden class). */
function claimedJob(row: ClaimedRow, workerId: string): ClaimedJob {
  const job: ClaimedJob = toJob({
    id: row.id,
    queue: row.queue,
    type: row.type,
    tenant: row.tenant,
    status: 'running',
    priority: row.priority,
    payload: row.payload,
    attempts: row.attempts,
    maxAttempts: row.maxAttempts,
    leaseSeconds: row.leaseSeconds,
    runAt: row.runAt,
    expiresAt: row.expiresAt,
    dedupKey: row.dedupKey,
    createdAt: row.createdAt,
    firstStartedAt: row.firstStartedAt,
    startedAt: row.startedAt,
    finishedAt: null,
    durationMs: null,
    leaseExpiresAt: row.leaseExpiresAt,
    workerId,
    cancelRequested: false,
    progress: row.progress,
    result: null,
    lastError: row.lastError,
    callbackUrl: row.callbackUrl,
    failureCallbackUrl: row.failureCallbackUrl,
    runMs: row.runMs,
    leaseToken: row.leaseToken,
  });
  // Only claims that name delivery targets see one: a pull worker's jobs keep the public shape.
  if (row.delivery !== null) job.delivery = row.delivery;
  if (row.traceparent != null) {
    job.traceContext =
      row.tracestate == null
        ? { traceparent: row.traceparent }
        : { traceparent: row.traceparent, tracestate: row.tracestate };
  }
  return job;
}
