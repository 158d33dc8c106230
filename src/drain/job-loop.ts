import type { Queryable } from '../db/types.js';
import { claimBatch } from '../engine/claim-batch.js';
import { releaseMany } from '../engine/release.js';
import type { ClaimedJob } from '../engine/types.js';
import type { QueueDeliveries } from './bulk-delivery/queue-deliveries.js';
import type { DrainBudget } from './budget.js';
import { ClaimPolicy, type ClaimingState } from './claim-policy.js';
import { CompletionBatch } from './completion-batch.js';
import { noJobCounts, type JobCounts } from './job-counts.js';
import { HeartbeatSchedule } from './heartbeat.js';
import { errorFields, type Logger } from './logger.js';
import { recordOutcome } from './record-outcome.js';
import type { JobRegistry } from './registry.js';
import { Attempt } from './run-attempt.js';
import { heartbeatsWithin } from './attempt-lease.js';
import type { ConnectionGate } from './connection-gate.js';
import type { JobDefinition } from './define-job.js';
import type { SubrequestBudget } from './subrequest-budget.js';
import { WakeUp } from './wake-up.js';
import { nextEvent, pause } from './loop-waits.js';
import type { WorkArrivals } from './work-arrivals.js';

/** How many claims the loop keeps out at once, and so how many connections its `claimsDb` wants. */
export { CLAIMS_AHEAD_AT_ONCE } from './claim-policy.js';

/**
 * An empty claim right after one that found jobs is tried again after this
 * long (plus up to as much again at random, so racing claimers fall out of
 * step), or sooner when work arrives, before the queue counts as empty.
 */
const RECHECK_EMPTY_AFTER_MS = 10;

export interface JobLoopOptions {
  workerId: string;
  /** Attempts running at once; each holds at most one connection (its heartbeat or its handler's I/O). */
  concurrency: number;
  /**
   * The jobs the loop claims at a time. Default (and never less than) the
   * free slots. A larger batch claims ahead: jobs that find no free slot wait in
   * this loop, their leases running, until one frees; one whose lease has
   * half run out by then is handed back unstarted. Worth it for many short
   * jobs: one claim statement serves hundreds. The loop holds up to one and
   * a half batches. Under a subrequest cap (a Worker's drain) the next batch
   * is claimed whole while half of this one still waits; without one (the
   * Node worker) it is claimed in halves, two claims out at once while the
   * queue has a backlog (see CLAIMS_AHEAD_AT_ONCE). Jobs waiting here count
   * against their tenant's concurrency like running ones.
   */
  claimBatchSize?: number;
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
  /**
   * Enqueues announced while the loop runs (a Worker's fast path): the loop
   * claims again for them instead of ending, and closes them once it stops claiming.
   */
  arrivals?: WorkArrivals;
  /**
   * The invocation's subrequest cap: a job starts only when what it may
   * still send fits (its outcome, its heartbeats, its handler's declared
   * subrequests), and claiming stops while that holds for one more job.
   */
  subrequests?: SubrequestBudget;
  /** The invocation's connections, shared by the drain's statements and the handlers' `ctx.fetch`. */
  connections?: ConnectionGate;
  /** The delivery targets this loop delivers queues' jobs to (set per queue over the API); none when left out. */
  deliveries?: QueueDeliveries | undefined;
  /**
   * Called once, the first time a claim comes back full: more jobs may wait
   * than this loop holds (a Worker drain starts helpers then, see DRAIN_FANOUT).
   */
  onBacklog?: () => void;
  /**
   * Connections of their own for the claims (default `db`). A connection
   * plans a statement the first time it runs it, and the claim that finds
   * jobs is the engine's costliest to plan: from a pool it lands now and then
   * on a connection new to it, and the jobs it finds start late. Claiming
   * ahead, the loop sends up to CLAIMS_AHEAD_AT_ONCE claims at once: give
   * it that many connections.
   */
  claimsDb?: Queryable;
}

/** A claimed job not started yet, when the claim that leased it was sent, and when its answer came. */
interface ClaimedAt {
  job: ClaimedJob;
  claimSentAt: number;
  claimAnsweredAt: number;
}

/** How often a loop with free slots looks for enqueues announced to it (WorkArrivals). */
const ARRIVALS_LOOK_EVERY_MS = 20;

/** The lease a job gets when its enqueue names none (the jobs table's default). */
const DEFAULT_LEASE_SECONDS = 60;

/**
 * Claims jobs of the registry's types and runs them, at most `concurrency` at
 * a time, until the budget stops claiming and what runs has finished.
 *
 * The loop alone claims, in the background while it starts the jobs it
 * holds; successes are completed beside it in group commits
 * (CompletionBatch), so a busy queue costs a few statements per batch of
 * jobs, an idle one answers at once, and no job waits for another's
 * completion, or for a claim, to start. The claims and the completions hold
 * at most three connections beside the running attempts (one claim at a
 * time unless claiming ahead: CLAIMS_AHEAD_AT_ONCE).
 */
export async function runJobs(db: Queryable, registry: JobRegistry, options: JobLoopOptions): Promise<JobCounts> {
  const { budget, concurrency, logger, waitForWork, arrivals, subrequests, deliveries } = options;
  const policy = new ClaimPolicy({ concurrency, claimBatchSize: options.claimBatchSize, capped: subrequests !== undefined });
  const counts = noJobCounts();
  /** Attempts started and not yet recorded. */
  let running = 0;
  /** Wakes the loop: an attempt ended (or, below, a claim came back). */
  const wake = new WakeUp();
  /** An attempt ended since the loop last looked. */
  let anAttemptEnded = false;
  /** Claimed ahead, in claim order, waiting for a free slot. */
  const claimedAhead: ClaimedAt[] = [];
  const completions = new CompletionBatch(db, counts, logger, (jobs) => subrequests?.release(jobs));
  const heartbeats = new HeartbeatSchedule();
  /** The attempts running now: the deadline interrupts them all. */
  const attempts = new Set<Attempt>();
  const stopListening = budget.onDeadline((reason) => {
    for (const attempt of attempts) attempt.interrupt(reason);
  });
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
  /**
   * Work arrived while the loop's one claim was out. That claim may have
   * looked before the work was there, so one more goes out at once rather
   * than after its answer: on an idle worker, the pickup would otherwise
   * wait for a claim that finds nothing.
   */
  let workArrivedWhileClaiming = false;
  let claimFailed = false;
  /** A claimed job did not fit in the subrequests left: claim no more. */
  let subrequestsSpent = false;
  /** The lease of the last job claimed: what the next claim's jobs likely get. */
  let lastLeaseSeconds = DEFAULT_LEASE_SECONDS;
  let backlogReported = false;

  /**
   * The most subrequests a job may still send once started: its outcome, the
   * heartbeats its lease needs before the deadline, and what its handler
   * declares. Reserved when it starts, so the cap never cuts it off.
   */
  function subrequestsOf({ job, claimSentAt }: ClaimedAt): number {
    const options = definitionOf(job).options;
    const lease = Math.min(job.leaseSeconds, options.leaseSeconds ?? job.leaseSeconds);
    const heartbeats = heartbeatsWithin(budget.msUntilAbort() + (Date.now() - claimSentAt), lease);
    return 1 + heartbeats + (options.subrequests ?? 0);
  }
  /** What the next claim's jobs will likely need each: the last lease seen, the most any type (or a delivery's one call) declares. */
  const mostDeclared = Math.max(
    deliveries === undefined ? 0 : 1,
    ...registry.types.map((type) => registry.definitionOf(type)!.options.subrequests ?? 0),
  );
  const likelySubrequestsPerJob = () => 1 + heartbeatsWithin(budget.msUntilAbort(), lastLeaseSeconds) + mostDeclared;

  const claimsDb = options.claimsDb ?? db;
  const claim = (max: number) =>
    claimBatch(claimsDb, { max, workerId: options.workerId, types: registry.types, deliveryTargets: deliveries?.targets });

  /** What runs a claimed job: its queue's delivery target when the claim gave one, else its type's handler. */
  function definitionOf(job: ClaimedJob): JobDefinition {
    return job.delivery === undefined ? registry.definitionOf(job.type)! : deliveries!.definitionFor(job.queue, job.delivery);
  }

  /** Gives back jobs claimed but never started: their attempt does not count. */
  async function handBack(jobs: readonly ClaimedJob[], delaySeconds = options.handBackDelaySeconds): Promise<void> {
    if (jobs.length === 0) return;
    try {
      const { released, stale } = await releaseMany(db, jobs, { delaySeconds });
      counts.handedBack += released.length;
      counts.leaseLost += stale.length;
    } catch (error) {
      logger.error('handing back unstarted jobs failed; they run again once their leases expire', {
        jobs: jobs.length,
        ...errorFields(error),
      });
    }
  }

  async function run({ job, claimSentAt, claimAnsweredAt }: ClaimedAt, reserved: number): Promise<void> {
    const definition = definitionOf(job);
    const attempt = new Attempt(db, job, claimSentAt, definition, logger, { subrequests, connections: options.connections });
    attempts.add(attempt);
    heartbeats.add(attempt);
    const startedAt = Date.now();
    // From the claim's answer: the claim dated the attempt before that, so its start is never dated late.
    const heldMs = startedAt - claimAnsweredAt;
    let outcome;
    try {
      outcome = await attempt.run();
    } finally {
      attempts.delete(attempt);
      heartbeats.delete(attempt);
    }
    policy.attemptTook(Date.now() - startedAt);
    // All but the outcome's own statement: heartbeats were counted as sent, the handler's declared ones are counted now.
    subrequests?.release(reserved - 1);
    subrequests?.countUnseen(Math.max(0, (definition.options.subrequests ?? 0) - attempt.fetchesSent));
    if (outcome.kind === 'succeeded') {
      completions.add({ id: job.id, leaseToken: job.leaseToken, result: outcome.result, heldMs });
      return;
    }
    try {
      await recordOutcome(db, { ...job, heldMs }, outcome, counts, options.handBackDelaySeconds);
    } finally {
      subrequests?.release(1);
    }
  }

  /** Runs a claimed job in a slot and records how it ended; never rejects. */
  async function start(claimed: ClaimedAt, reserved: number): Promise<void> {
    running += 1;
    try {
      await run(claimed, reserved);
    } catch (error) {
      logger.error('could not record how a job ended; it runs again once its lease expires', {
        jobId: claimed.job.id,
        ...errorFields(error),
      });
    } finally {
      running -= 1;
      anAttemptEnded = true;
      wake.notify();
    }
  }

  /** Starts claimed jobs in the free slots; hands back those it must not start. */
  async function startClaimed(): Promise<void> {
    const stopping = budget.signal.aborted || budget.stopped.aborted;
    const unstarted: ClaimedJob[] = [];
    while (claimedAhead.length > 0 && (stopping || running < concurrency)) {
      const claimed = claimedAhead.shift()!;
      // A job that waited here until half its lease ran out could be reaped while it runs.
      if (stopping || !hasHalfItsLease(claimed)) {
        unstarted.push(claimed.job);
        continue;
      }
      const reserved = subrequests === undefined ? 0 : subrequestsOf(claimed);
      if (subrequests !== undefined && !subrequests.tryReserve(reserved)) {
        subrequestsSpent = true;
        unstarted.push(claimed.job);
        continue;
      }
      void start(claimed, reserved);
    }
    await handBack(unstarted);
    // Without claiming ahead the loop holds no job it has no slot for: one
    // more comes only when a claim answering arrived work and the claim it
    // went out beside both found one, and it goes back at once, for any
    // worker to start.
    if (!policy.claimsAhead) await handBack(claimedAhead.splice(0).map(({ job }) => job), 0);
  }

  /** The claims on their way, running beside the attempts, and how many jobs they may bring. */
  const claimsOut = new Set<Promise<void>>();
  let jobsBeingClaimed = 0;

  /**
   * Claims in the background, so the loop keeps starting the jobs it holds
   * while the claim is out; the answer wakes the loop.
   */
  function claimInBackground(max: number): void {
    jobsBeingClaimed += max;
    const claiming: Promise<void> = claimJobs(max).finally(() => {
      claimsOut.delete(claiming);
      jobsBeingClaimed -= max;
      wake.notify();
    });
    claimsOut.add(claiming);
  }

  /** One claim, its jobs put in line to start; never rejects. */
  async function claimJobs(max: number): Promise<void> {
    try {
      let claimSentAt = Date.now();
      let jobs = await claim(max);
      if (jobs.length === 0 && lastClaimFound) {
        await pause(RECHECK_EMPTY_AFTER_MS * (1 + Math.random()), waitForWork, budget.stopped);
        claimSentAt = Date.now();
        jobs = await claim(max);
      }
      counts.claimed += jobs.length;
      const claimAnsweredAt = Date.now();
      for (const job of jobs) claimedAhead.push({ job, claimSentAt, claimAnsweredAt });
      if (jobs.length > 0) lastLeaseSeconds = jobs[jobs.length - 1]!.leaseSeconds;
      lastClaimFound = jobs.length > 0;
      lastClaimFull = jobs.length === max;
      if (lastClaimFull && !backlogReported) {
        backlogReported = true;
        options.onBacklog?.();
      }
    } catch (error) {
      logger.error('claiming jobs failed', errorFields(error));
      // A drain lets what runs finish and leaves the rest to the next one; a worker waits a poll and tries again.
      if (waitForWork === undefined) claimFailed = true;
      lastClaimFound = false;
      lastClaimFull = false;
    }
  }

  /** What the claim policy reads: the loop's holdings and what it knows of the queue. */
  function claimingState(): ClaimingState {
    return {
      lastClaim: { found: lastClaimFound, full: lastClaimFull },
      somethingHappened,
      running,
      held: claimedAhead.length,
      claimsOut: claimsOut.size,
      beingClaimed: jobsBeingClaimed,
      affordableJobs: subrequests?.affordableJobs(likelySubrequestsPerJob()) ?? Number.POSITIVE_INFINITY,
      msLeft: budget.msUntilAbort(),
    };
  }

  for (;;) {
    await startClaimed();
    const mayClaim = budget.claiming && !claimFailed && !subrequestsSpent;
    // Closed in the same turn as the last look, so an announcement after it starts a drain of its own.
    if (!mayClaim) arrivals?.close();
    if (arrivals?.take()) somethingHappened = true;
    // An enqueue announced to this loop must find room in it: none is left waiting for a drain that cannot take it.
    if (subrequests !== undefined) {
      arrivals?.setRoom(policy.roomForArrivals(subrequests.affordableJobs(likelySubrequestsPerJob()), claimedAhead.length, claimsOut.size));
    }
    // Beside the claim out, for the job that arrived (workArrivedWhileClaiming).
    if (mayClaim && workArrivedWhileClaiming && claimsOut.size === 1) {
      claimInBackground(1);
      somethingHappened = false;
    }
    workArrivedWhileClaiming = false;
    // Then the claims the policy asks for (the claim beside, if sent, leaves room for no other).
    for (let size = mayClaim ? policy.nextClaim(claimingState()) : 0; size > 0; size = policy.nextClaim(claimingState())) {
      claimInBackground(size);
      somethingHappened = false;
    }
    // Idle, with one claim out and no backlog, the loop still listens for work (workArrivedWhileClaiming).
    const idle = running === 0 && claimedAhead.length === 0;
    const waitsForWork =
      mayClaim && waitForWork !== undefined && running < concurrency && (claimsOut.size === 0 || (idle && claimsOut.size === 1 && !lastClaimFull));
    if (idle && claimsOut.size === 0 && !waitsForWork) break;
    // Announcements come from other requests, which must not touch this drain's I/O: it looks for them itself.
    const lookForArrivals =
      arrivals !== undefined && mayClaim && running < concurrency ? setTimeout(() => wake.notify(), ARRIVALS_LOOK_EVERY_MS) : undefined;
    const event = await nextEvent(wake, waitsForWork ? waitForWork : undefined, budget.stopped);
    clearTimeout(lookForArrivals);
    if (event === 'work' || anAttemptEnded) somethingHappened = true;
    if (event === 'work' && claimsOut.size === 1) workArrivedWhileClaiming = true;
    anAttemptEnded = false;
  }
  arrivals?.close();
  // Claims may still be out when the budget stops the loop: their jobs are handed back.
  await Promise.all(claimsOut);
  await startClaimed();
  stopListening();
  heartbeats.stop();
  await completions.settle();
  return counts;
}

function hasHalfItsLease({ job, claimSentAt }: ClaimedAt): boolean {
  return Date.now() - claimSentAt < (job.leaseSeconds * 1000) / 2;
}
