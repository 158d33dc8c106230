import type { Queryable } from '../db/types';
import { claimBatch, MAX_CLAIM } from '../engine/claim-batch';
import { completeMany, type Completion } from '../engine/complete';
import type { ClaimedJob } from '../engine/types';
import type { DrainBudget } from './budget';
import { noJobCounts, type JobCounts } from './job-counts';
import { errorFields, withFields, type Logger } from './logger';
import { recordOutcome } from './record-outcome';
import type { JobRegistry } from './registry';
import { runAttempt } from './run-attempt';
import { sleep } from './sleep';

/**
 * An empty claim right after one that found jobs is tried again after this
 * long (plus up to as much again at random, so racing claimers fall out of
 * step) before the queue counts as empty.
 */
const RECHECK_EMPTY_AFTER_MS = 10;

export interface JobLoopOptions {
  workerId: string;
  /** Attempts running at once; each holds at most one connection (its heartbeat or its handler's I/O). */
  concurrency: number;
  budget: DrainBudget;
  logger: Logger;
  /** How long a handed-back job waits before it can be claimed again. */
  handBackDelaySeconds: number;
  /**
   * How an idle loop waits for work (the Node worker: a NOTIFY or the poll
   * interval). Without it the loop ends once the queue is empty and nothing
   * runs: a drain.
   */
  waitForWork?: (signal: AbortSignal) => Promise<void>;
}

/**
 * Claims jobs of the registry's types and runs them, at most `concurrency` at
 * a time, until the budget stops claiming and what runs has finished.
 *
 * The loop alone talks to the database for claims and completions, one
 * statement at a time, so the drain holds one connection beside its running
 * attempts. Successes are completed in batches: everything that finished
 * while the loop was busy goes out in one completeMany before the next
 * claim (a group commit), so a busy queue costs two statements per batch of
 * jobs and an idle one answers at once.
 */
export async function runJobs(db: Queryable, registry: JobRegistry, options: JobLoopOptions): Promise<JobCounts> {
  const { budget, concurrency, logger, waitForWork } = options;
  const counts = noJobCounts();
  const running = new Set<Promise<void>>();
  const succeeded: Completion[] = [];
  const pace = new AttemptPace();
  /**
   * What the last claim said about the queue. A claim can come back short,
   * even empty, while jobs wait: a concurrent claim held the rows it chose
   * (SKIP LOCKED). So a short batch only means "claim again once something
   * happened", and an empty claim right after one that found jobs is
   * confirmed by another a moment later before the queue counts as empty.
   * A loop that has found nothing yet believes the first empty claim: an
   * idle queue costs one statement per drain.
   */
  let lastClaimFound = false;
  let lastClaimFull = true;
  /** An attempt ended or work arrived since the last claim. */
  let somethingHappened = false;
  let claimFailed = false;

  const claim = (max: number) => claimBatch(db, { max, workerId: options.workerId, types: registry.types });

  async function flushCompletions(): Promise<void> {
    if (succeeded.length === 0) return;
    const batch = succeeded.splice(0);
    try {
      const { completed, stale } = await completeMany(db, batch);
      counts.succeeded += completed.length;
      counts.leaseLost += stale.length;
    } catch (error) {
      // Kept for the next flush; if none succeeds, the leases run out and the jobs run again.
      succeeded.unshift(...batch);
      logger.error('completing jobs failed; will try again', { jobs: batch.length, ...errorFields(error) });
    }
  }

  async function run(job: ClaimedJob): Promise<void> {
    const definition = registry.definitionOf(job.type);
    if (definition === undefined || budget.signal.aborted || budget.stopped.aborted) {
      // Claimed as the drain stopped (a missing handler cannot happen: claims name only
      // registered types). Never started, so the attempt does not count.
      return recordOutcome(db, job, { kind: 'handed-back', countAttempt: false }, counts, options.handBackDelaySeconds);
    }
    const log = withFields(logger, { jobId: job.id, type: job.type, attempt: job.attempts });
    const startedAt = Date.now();
    const outcome = await runAttempt(db, job, definition, budget, log);
    pace.record(Date.now() - startedAt);
    if (outcome.kind === 'succeeded') succeeded.push({ id: job.id, leaseToken: job.leaseToken, result: outcome.result });
    else await recordOutcome(db, job, outcome, counts, options.handBackDelaySeconds);
  }

  function start(job: ClaimedJob): void {
    const task: Promise<void> = run(job)
      .catch((error: unknown) =>
        logger.error('could not record how a job ended; it runs again once its lease expires', {
          jobId: job.id,
          ...errorFields(error),
        }),
      )
      .finally(() => running.delete(task));
    running.add(task);
  }

  for (;;) {
    await flushCompletions();
    const mayClaim = budget.claiming && !claimFailed;
    // After a short batch whose jobs have all ended, claiming again is how to find out whether more wait.
    const worthClaiming = lastClaimFull || somethingHappened || (running.size === 0 && lastClaimFound);
    if (mayClaim && running.size < concurrency && worthClaiming) {
      const max = pace.claimSize(concurrency - running.size, budget.msUntilAbort());
      try {
        let jobs = await claim(max);
        if (jobs.length === 0 && lastClaimFound) {
          await sleep(RECHECK_EMPTY_AFTER_MS * (1 + Math.random()));
          jobs = await claim(max);
        }
        counts.claimed += jobs.length;
        for (const job of jobs) start(job);
        lastClaimFound = jobs.length > 0;
        lastClaimFull = jobs.length === max;
      } catch (error) {
        logger.error('claiming jobs failed', errorFields(error));
        // A drain lets what runs finish and leaves the rest to the next one; a worker waits a poll and tries again.
        if (waitForWork === undefined) claimFailed = true;
        lastClaimFound = false;
        lastClaimFull = false;
      }
      somethingHappened = false;
      continue;
    }
    const waitsForWork = mayClaim && waitForWork !== undefined && running.size < concurrency;
    if (running.size === 0 && !waitsForWork) break;
    await nextEvent(running, waitsForWork ? waitForWork : undefined, budget.stopped);
    somethingHappened = true;
  }
  await flushCompletions();
  return counts;
}

/** Until an attempt ends, or (when given) work may have arrived, or the loop is stopped. */
async function nextEvent(
  running: ReadonlySet<Promise<void>>,
  waitForWork: ((signal: AbortSignal) => Promise<void>) | undefined,
  stopped: AbortSignal,
): Promise<void> {
  if (waitForWork === undefined) return Promise.race(running);
  const settled = new AbortController();
  try {
    await Promise.race([...running, waitForWork(AbortSignal.any([settled.signal, stopped]))]);
  } finally {
    settled.abort();
  }
}

/**
 * Sizes claims to the time left: never more jobs than there are free slots,
 * and, once attempts have been timed, no more than the free slots can finish
 * before the deadline (at least one, so a long job still gets its turn).
 */
class AttemptPace {
  private meanMs: number | undefined;

  record(ms: number): void {
    this.meanMs = this.meanMs === undefined ? ms : 0.8 * this.meanMs + 0.2 * ms;
  }

  claimSize(free: number, msLeft: number): number {
    const slots = Math.min(free, MAX_CLAIM);
    if (this.meanMs === undefined || this.meanMs <= 0 || !Number.isFinite(msLeft)) return slots;
    return Math.max(1, Math.min(slots, Math.floor((free * msLeft) / this.meanMs)));
  }
}
