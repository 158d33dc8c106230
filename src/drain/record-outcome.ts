import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from '../engine/errors.js';
import { fail } from '../engine/fail.js';
import { release } from '../engine/release.js';
import type { AttemptTiming, ClaimedJob } from '../engine/types.js';
import type { JobCounts } from './job-counts.js';
import type { AttemptOutcome } from './run-attempt.js';

/**
 * Writes an attempt's outcome other than success (successes are completed in
 * batches by the job loop). Every write presents the claim's token; a token
 * that lost the job changes nothing and is counted as a lost lease.
 */
export async function recordOutcome(
  db: Queryable,
  job: ClaimedJob & AttemptTiming,
  outcome: Exclude<AttemptOutcome, { kind: 'succeeded' }>,
  counts: JobCounts,
  handBackDelaySeconds: number,
): Promise<void> {
  try {
    switch (outcome.kind) {
      case 'failed': {
        const failed = await fail(db, {
          id: job.id,
          leaseToken: job.leaseToken,
          heldMs: job.heldMs,
          error: outcome.error,
          forGood: outcome.forGood,
          ...(outcome.retryInSeconds === undefined ? {} : { retryInSeconds: outcome.retryInSeconds }),
        });
        if (failed.status === 'cancelled') counts.cancelled += 1;
        else if (failed.status === 'failed') counts.failed += 1;
        else counts.retrying += 1;
        return;
      }
      case 'cancelled':
        // A job whose cancel was asked for ends cancelled however it fails.
        await fail(db, {
          id: job.id,
          leaseToken: job.leaseToken,
          heldMs: job.heldMs,
          error: outcome.error,
        });
        counts.cancelled += 1;
        return;
      case 'handed-back':
        // After a short delay, so the drain that lets go does not take it straight back.
        await release(db, job, { delaySeconds: handBackDelaySeconds, countAttempt: outcome.countAttempt });
        counts.handedBack += 1;
        return;
      case 'lease-lost':
        counts.leaseLost += 1;
        return;
      case 'parked':
        // The step that parked the job wrote it back, in the statement that recorded the step.
        counts.parked += 1;
        return;
    }
  } catch (error) {
    if (!(error instanceof StaleLeaseError)) throw error;
    counts.leaseLost += 1;
  }
}
