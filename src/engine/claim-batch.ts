import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { toJob } from './job-json.js';
import type { ClaimedJob, Job } from './types.js';

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
  /** Only this tenant's jobs (a tenant-bound pull worker). */
  tenant?: string;
}

export const MAX_CLAIM = 1000;

/**
 * The claim statement lives in the database (skiplock.claim_batch, migration
 * 0007), which keeps its plan per connection.
 */
const claimBatchSql = /* sql */ `
SELECT job, lease_token AS "leaseToken" FROM skiplock.claim_batch($1, $2, $3, $4, $5, $6)`;

/**
 * Claims up to `max` ready jobs in one statement, fairly across tenants and
 * within every tenant's limits (how: migrations/0007_claim_batch_function.sql).
 * Each job comes with the fencing token its worker must present.
 */
export async function claimBatch(db: Queryable, options: ClaimOptions): Promise<ClaimedJob[]> {
  if (!Number.isInteger(options.max) || options.max < 1 || options.max > MAX_CLAIM) {
    throw new InvalidInputError(`max must be an integer from 1 to ${MAX_CLAIM}`, 'max');
  }
  if (options.types?.length === 0) return [];
  const rows = await db.query<{ job: Job; leaseToken: string }>({
    name: 'skiplock_claim_batch',
    text: claimBatchSql,
    params: [
      options.max,
      options.leaseSeconds ?? null,
      options.types ?? null,
      options.queues ?? null,
      options.tenant ?? null,
      options.workerId,
    ],
  });
  return rows.map((row) => ({ ...toJob(row.job), leaseToken: row.leaseToken }));
}
