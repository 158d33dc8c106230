import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job, Json, Lease } from './types.js';

export interface Failure extends Lease {
  /** What went wrong; stored as the job's lastError. */
  error: Json;
  /** Retry after exactly this long instead of the job's backoff. */
  retryInSeconds?: number;
  /** No retry: the job can never succeed (bad payload, 4xx from a webhook). */
  forGood?: boolean;
}

/**
 * Ends an attempt with an error (skiplock.fail). The job retries after its
 * backoff (full jitter: a uniform draw from 0 to
 * min(max, base * 2^(attempt-1)) seconds) unless its attempts are spent or
 * the failure is for good; a job whose cancellation was asked for ends
 * cancelled.
 */
const failSql = /* sql */ `SELECT skiplock.fail($1, $2, $3::jsonb, $4, $5) AS job`;

export async function fail(db: Queryable, failure: Failure): Promise<Job> {
  const [row] = await db.query<{ job: Job | null }>({
    name: 'skiplock_fail',
    text: failSql,
    params: [
      failure.id,
      failure.leaseToken,
      JSON.stringify(failure.error),
      failure.retryInSeconds ?? null,
      failure.forGood ?? false,
    ],
  });
  if (!row?.job) throw new StaleLeaseError([failure.id]);
  return toJob(row.job);
}
