import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { AttemptTiming, Job, Json, Lease } from './types.js';

export interface Failure extends Lease, AttemptTiming {
  /** What went wrong; stored as the job's lastError. */
  error: Json;
  /** Retry after exactly this long instead of the job's backoff. */
  retryInSeconds?: number;
  /** No retry: the job can never succeed (bad payload, 4xx from a webhook). */
  forGood?: boolean;
}

/**
 * Ends attempts with an error (skiplock.fail_jobs). A job retries after its
 * backoff (full jitter: a uniform draw from 0 to
 * min(max, base * 2^(attempt-1)) seconds) unless its attempts are spent or
 * the failure is for good; a job whose cancellation was asked for ends
 * cancelled.
 */
const failSql = /* sql */ `SELECT id, outcome, job FROM skiplock.fail_jobs($1::jsonb, $2::boolean)`;

/** How a failed attempt left its job. */
export type FailOutcome = 'retrying' | 'failed' | 'cancelled';

export interface FailManyResult {
  /** The jobs this call changed, and how each was left. */
  failed: Array<{ id: string; outcome: FailOutcome }>;
  /** Ids whose token no longer owned the job; those jobs were not changed. */
  stale: string[];
}

async function runFailures(db: Queryable, failures: readonly Failure[], withJobs: boolean) {
  return db.query<{ id: string; outcome: FailOutcome; job: Job | null }>({
    name: 'skiplock_fail',
    text: failSql,
    params: [
      JSON.stringify(
        failures.map(({ id, leaseToken, error, retryInSeconds, forGood, heldMs }) => ({
          id,
          leaseToken,
          error,
          retryInSeconds,
          forGood,
          heldMs,
        })),
      ),
      withJobs,
    ],
  });
}

/** Fails many attempts in one statement; reports which tokens were stale. */
export async function failMany(db: Queryable, failures: readonly Failure[]): Promise<FailManyResult> {
  if (failures.length === 0) return { failed: [], stale: [] };
  const rows = await runFailures(db, failures, false);
  const changed = new Set(rows.map((row) => row.id));
  return {
    failed: rows.map(({ id, outcome }) => ({ id, outcome })),
    stale: failures.filter((failure) => !changed.has(failure.id)).map((failure) => failure.id),
  };
}

/** Fails one attempt and returns the job; throws StaleLeaseError if its token no longer owns it. */
export async function fail(db: Queryable, failure: Failure): Promise<Job> {
  const [row] = await runFailures(db, [failure], true);
  if (!row?.job) throw new StaleLeaseError([failure.id]);
  return toJob(row.job);
}
