import type { Queryable } from '../db/types.js';
import { claimBatch } from '../engine/claim-batch.js';
import { releaseMany } from '../engine/release.js';
import type { ClaimedJob } from '../engine/types.js';
import type { QueueDeliveries } from './bulk-delivery/queue-deliveries.js';
import type { DrainBudget } from './budget.js';
import {
  BEFORE_THE_FIRST_CLAIM,
  type ClaimBatchSize,
  ClaimPolicy,
  type ClaimingState,
  type LastClaim,
} from './claim-policy.js';
import { CompletionBatch } from './completion-batch.js';
import { noJobCounts, type JobCounts } from './job-counts.js';
import { HeartbeatSchedule } from './heartbeat.js';
import { errorFields, type Logger } from './logger.js';
import { recordOutcome } from './record-outcome.js';
import type { JobRegistry } from './registry.js';
import { Attempt, type AttemptOutcome } from './run-attempt.js';
import { endAttemptSpan, recordClaimSpan, startAttemptSpan } from './attempt-span.js';
import type { Tracing } from '../engine/tracing.js';
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
   * against their tenant's concurrency like running ones. `auto` sizes the
   * batch from the claims' round trip and the attempts' run time (see
   * ClaimPolicy.claimBatchSize).
   */
  claimBatchSize?: ClaimBatchSize;
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
   * How many notifications of work (`waitForWork`'s NOTIFYs) have arrived so
   * far. A claim whose statement went out after a notification sees its
   * jobs: a notification that came before the statement of the one claim
   * out sends no claim beside it (the poll interval running out still does).
   * Without this count the loop cannot tell, and always sends one.
   */
  notificationsReceived?: () => number;
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
   * Called each time a claim comes back full: more jobs may wait than this
   * loop holds (a Worker drain starts helpers then, see DRAIN_FANOUT, and
   * decides itself how often to look again).
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
  /**
   * Runs each attempt in a span of the trace its job was enqueued in (see
   * startAttemptSpan); the claims then read the jobs' trace contexts too.
   */
  tracing?: Tracing | undefined;
}

/**
 * One claim on its way: the notifications that had arrived when its
 * statement went out (those whose jobs it sees). Infinite while it pauses
 * before looking again: it looks after any that come meanwhile (the pause
 * ends on them).
 */
interface ClaimOut {
  notificationsSeen: number;
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
  return new JobLoop(db, registry, options).run();
}

/**
 * Where a job loop is between two events.
 *
 * - `claiming`: it may claim. It waits for its own events: an attempt
 *   ended, a claim came back, and (given `arrivals`, with a slot free) the
 *   next look for announced enqueues.
 * - `listening` (a worker only, `waitForWork` given): it may claim, and it
 *   waits for work as well, because it has a free slot and no claim out, or
 *   it is idle with one claim out that did not follow a full one. Work that
 *   arrives while that one claim is out sends a claim of one beside it: the
 *   claim out may have looked before the work was there, and on an idle
 *   worker the pickup would otherwise wait for its answer. Not when the
 *   claim out looks after the work (JobLoopOptions.notificationsReceived).
 * - `finishing`: it claims no more, for good: the budget stopped claiming (a
 *   drain's deadline near, a worker stopped), a drain's claim failed, or a
 *   held job did not fit in the subrequests left. Arrivals are closed. It
 *   waits for what runs and for the claims still out; held jobs still start
 *   in free slots while they fit, and all go back once the budget stops
 *   (its deadline, or a worker's stop).
 * - `ended`: nothing runs, nothing is held, no claim is out, and the loop
 *   does not listen: a drain that found the queue empty, or a finished loop.
 *   The completions are settled and the loop returns.
 */
type LoopMode = 'claiming' | 'listening' | 'finishing' | 'ended';

/**
 * The job loop as a state machine: its state in this object's fields, its
 * modes in `mode` (LoopMode), moved on in turns.
 *
 * A turn starts the held jobs that have a free slot and hands back those it
 * must not start (startHeld); stops claiming for good once it may not claim
 * (stopClaiming); sends the claims the ClaimPolicy asks for (sendClaims);
 * then ends the turn in a mode (modeAfterTurn) and waits for the next
 * event in it (waitForEvent).
 *
 * Events change the state between turns, each in a method of its own:
 * claimAnswered and claimFailed (a claim in the background), attemptEnded
 * and slotFreed (an attempt in a slot), workArrived (a worker's wait for
 * work ended).
 *
 * Two kinds of loop share it: a drain (no `waitForWork`: a Worker's cron
 * tick, alarm or fast path) ends once the queue is empty and nothing runs,
 * and may be held to a subrequest cap that sizes its claims; a worker
 * (`waitForWork`: the Node worker) runs until it is stopped, listening for
 * work whenever a slot is free.
 */
class JobLoop {
  private mode: LoopMode = 'claiming';
  private readonly counts = noJobCounts();
  private readonly policy: ClaimPolicy;
  /** Attempts started and not yet recorded. */
  private running = 0;
  /** The attempts running now: the deadline interrupts them all. */
  private readonly attempts = new Set<Attempt>();
  /** Claimed, in claim order, waiting for a free slot. */
  private readonly held: ClaimedAt[] = [];
  /** The claims on their way, running beside the attempts, and how many jobs they may bring. */
  private readonly claimsOut = new Map<Promise<void>, ClaimOut>();
  private beingClaimed = 0;
  /**
   * An empty claim right after one that found jobs is confirmed by another
   * a moment later before the queue counts as empty. A loop that has found
   * nothing yet believes the first empty claim: an idle queue costs one
   * statement per drain.
   */
  private lastClaim: LastClaim = { ...BEFORE_THE_FIRST_CLAIM };
  /** An attempt ended or work arrived since the last claim. */
  private somethingHappened = false;
  /** An attempt ended since the loop last waited (it counts as something happening once the wait is over). */
  private anAttemptEnded = false;
  /** Work arrived while the loop listened beside its one claim out: a claim of one goes out beside it. */
  private workArrivedWhileClaiming = false;
  /** A drain's claim failed, or a held job did not fit in the subrequests left: the loop stops claiming at its next turn. */
  private claimingEnds = false;
  /** The lease of the last job claimed: what the next claim's jobs likely get. */
  private lastLeaseSeconds = DEFAULT_LEASE_SECONDS;
  /** Wakes the loop: a slot freed or a claim came back. */
  private readonly wake = new WakeUp();
  private readonly completions: CompletionBatch;
  private readonly heartbeats = new HeartbeatSchedule();
  /** The most subrequests any type (or a delivery's one call) declares. */
  private readonly mostDeclared: number;

  private readonly budget: DrainBudget;
  private readonly concurrency: number;
  private readonly logger: Logger;
  private readonly waitForWork: ((signal: AbortSignal) => Promise<void>) | undefined;
  private readonly arrivals: WorkArrivals | undefined;
  private readonly subrequests: SubrequestBudget | undefined;
  private readonly deliveries: QueueDeliveries | undefined;
  private readonly claimsDb: Queryable;

  constructor(
    private readonly db: Queryable,
    private readonly registry: JobRegistry,
    private readonly options: JobLoopOptions,
  ) {
    this.budget = options.budget;
    this.concurrency = options.concurrency;
    this.logger = options.logger;
    this.waitForWork = options.waitForWork;
    this.arrivals = options.arrivals;
    this.subrequests = options.subrequests;
    this.deliveries = options.deliveries;
    this.claimsDb = options.claimsDb ?? db;
    const capped = this.subrequests !== undefined;
    this.policy = new ClaimPolicy({ concurrency: this.concurrency, claimBatchSize: options.claimBatchSize, capped });
    this.completions = new CompletionBatch(db, this.counts, this.logger, (jobs) => this.subrequests?.release(jobs));
    this.mostDeclared = Math.max(
      this.deliveries === undefined ? 0 : 1,
      ...registry.types.map((type) => registry.definitionOf(type)!.options.subrequests ?? 0),
    );
  }

  async run(): Promise<JobCounts> {
    const stopListening = this.budget.onDeadline((reason) => {
      for (const attempt of this.attempts) attempt.interrupt(reason);
    });
    for (;;) {
      await this.startHeld();
      if (this.mode !== 'finishing' && !this.mayClaim()) this.stopClaiming();
      // Enqueues announced to this drain: worth claiming again.
      if (this.arrivals?.take()) this.somethingHappened = true;
      this.offerRoomToArrivals();
      if (this.mode !== 'finishing') this.sendClaims();
      this.workArrivedWhileClaiming = false;
      this.mode = this.modeAfterTurn();
      if (this.mode === 'ended') break;
      await this.waitForEvent();
    }
    this.arrivals?.close();
    stopListening();
    this.heartbeats.stop();
    await this.completions.settle();
    return this.counts;
  }

  private mayClaim(): boolean {
    return this.budget.claiming && !this.claimingEnds;
  }

  /**
   * To `finishing`, for good. Arrivals close in the same turn as the last
   * look for them, so an announcement after it starts a drain of its own.
   */
  private stopClaiming(): void {
    this.mode = 'finishing';
    this.arrivals?.close();
  }

  /** The mode a turn ends in: what the loop waits for next, or its end. */
  private modeAfterTurn(): LoopMode {
    const idle = this.running === 0 && this.held.length === 0;
    if (this.mode === 'finishing') return idle && this.claimsOut.size === 0 ? 'ended' : 'finishing';
    if (this.listens(idle)) return 'listening';
    return idle && this.claimsOut.size === 0 ? 'ended' : 'claiming';
  }

  /** A worker that may claim listens while a slot is free and no claim is out, or, idle, beside one claim not after a full one. */
  private listens(idle: boolean): boolean {
    if (this.waitForWork === undefined || this.running >= this.concurrency) return false;
    return this.claimsOut.size === 0 || (idle && this.claimsOut.size === 1 && !this.lastClaim.full);
  }

  /** Until the next event of the mode the loop is in. */
  private async waitForEvent(): Promise<void> {
    // Announcements come from other requests, which must not touch this drain's I/O: it looks for them itself.
    const lookForArrivals =
      this.arrivals !== undefined && this.mode !== 'finishing' && this.running < this.concurrency
        ? setTimeout(() => this.wake.notify(), ARRIVALS_LOOK_EVERY_MS)
        : undefined;
    const notificationsBefore = this.notificationsNow();
    const event = await nextEvent(
      this.wake,
      this.mode === 'listening' ? this.waitForWork : undefined,
      this.budget.stopped,
    );
    clearTimeout(lookForArrivals);
    if (event === 'work') this.workArrived(this.notificationsNow() > notificationsBefore);
    if (this.anAttemptEnded) {
      this.anAttemptEnded = false;
      this.somethingHappened = true;
    }
  }

  /**
   * Work may have arrived (the loop listened; `notified`: a notification
   * came, not just the poll interval): worth a claim, at once beside a claim
   * out that may have looked too early. A claim out that looks after it
   * answers for it: nothing more to send.
   */
  private workArrived(notified: boolean): void {
    if (this.claimsOut.size === 1) {
      const [claimOut] = this.claimsOut.values();
      if (this.looksAfterTheWake(claimOut!, notified)) return;
      this.workArrivedWhileClaiming = true;
    }
    this.somethingHappened = true;
  }

  /**
   * Whether the claim out looks after what woke the loop: it pauses before
   * looking again, or the wake was a notification that came before its
   * statement went out. On an idle worker the next job's notification often
   * comes while the claim after the last job pauses: the pause ends on it,
   * and the claim looks after it, so a claim beside would only race it for
   * the job, on the other connection, at the moment the job waits. Without
   * the count of notifications the loop cannot tell: no.
   */
  private looksAfterTheWake(claim: ClaimOut, notified: boolean): boolean {
    const received = this.options.notificationsReceived;
    if (received === undefined) return false;
    return claim.notificationsSeen === Number.POSITIVE_INFINITY || (notified && claim.notificationsSeen >= received());
  }

  /** The notifications arrived so far, read as a claim's statement goes out; none counted without `notificationsReceived`. */
  private notificationsNow(): number {
    return this.options.notificationsReceived?.() ?? Number.NEGATIVE_INFINITY;
  }

  // Claims

  /** Sends the claim of one for arrived work, then the claims the policy asks for (after a claim beside, it allows no other). */
  private sendClaims(): void {
    if (this.workArrivedWhileClaiming && this.claimsOut.size === 1) this.claimInBackground(1);
    for (
      let size = this.policy.nextClaim(this.claimingState());
      size > 0;
      size = this.policy.nextClaim(this.claimingState())
    ) {
      this.claimInBackground(size);
    }
  }

  private claimingState(): ClaimingState {
    return {
      lastClaim: this.lastClaim,
      somethingHappened: this.somethingHappened,
      running: this.running,
      held: this.held.length,
      claimsOut: this.claimsOut.size,
      beingClaimed: this.beingClaimed,
      affordableJobs: this.affordableJobs(),
      msLeft: this.budget.msUntilAbort(),
    };
  }

  /** Claims in the background, so the loop keeps starting the jobs it holds while the claim is out; the answer wakes the loop. */
  private claimInBackground(max: number): void {
    this.somethingHappened = false;
    this.beingClaimed += max;
    const out: ClaimOut = { notificationsSeen: this.notificationsNow() };
    const claiming: Promise<void> = this.claim(max, out).finally(() => {
      this.claimsOut.delete(claiming);
      this.beingClaimed -= max;
      this.wake.notify();
    });
    this.claimsOut.set(claiming, out);
  }

  /** One claim (tried once more when it finds nothing right after one that found jobs); never rejects. */
  private async claim(max: number, out: ClaimOut): Promise<void> {
    try {
      let claimSentAt = Date.now();
      let jobs = await this.claimBatch(max);
      if (jobs.length === 0 && this.lastClaim.found) {
        if (this.waitForWork !== undefined) out.notificationsSeen = Number.POSITIVE_INFINITY;
        await pause(RECHECK_EMPTY_AFTER_MS * (1 + Math.random()), this.waitForWork, this.budget.stopped);
        out.notificationsSeen = this.notificationsNow();
        claimSentAt = Date.now();
        jobs = await this.claimBatch(max);
      }
      this.claimAnswered(jobs, max, claimSentAt);
      const { tracing, workerId } = this.options;
      if (tracing !== undefined && jobs.length > 0) recordClaimSpan(tracing, jobs, { sentAt: claimSentAt, workerId });
    } catch (error) {
      this.claimFailed(error);
    }
  }

  private claimBatch(max: number): Promise<ClaimedJob[]> {
    const { registry, deliveries } = this;
    return claimBatch(this.claimsDb, {
      max,
      workerId: this.options.workerId,
      types: registry.types,
      deliveryTargets: deliveries?.targets,
      traceContexts: this.options.tracing !== undefined,
    });
  }

  /** A claim came back: its jobs wait for a slot, and what it says about the queue is kept; a full one reports a backlog. */
  private claimAnswered(jobs: readonly ClaimedJob[], max: number, claimSentAt: number): void {
    this.counts.claimed += jobs.length;
    const claimAnsweredAt = Date.now();
    this.policy.claimTook(claimAnsweredAt - claimSentAt);
    for (const job of jobs) this.held.push({ job, claimSentAt, claimAnsweredAt });
    if (jobs.length > 0) this.lastLeaseSeconds = jobs[jobs.length - 1]!.leaseSeconds;
    this.lastClaim = { found: jobs.length > 0, full: jobs.length === max };
    if (this.lastClaim.full) this.options.onBacklog?.();
  }

  private claimFailed(error: unknown): void {
    this.logger.error('claiming jobs failed', errorFields(error));
    // A drain lets what runs finish and leaves the rest to the next one; a worker waits a poll and tries again.
    if (this.waitForWork === undefined) this.claimingEnds = true;
    this.lastClaim = { found: false, full: false };
  }

  // Slots

  /** Starts held jobs in the free slots; hands back those it must not start. */
  private async startHeld(): Promise<void> {
    const stopping = this.budget.signal.aborted || this.budget.stopped.aborted;
    const unstarted: ClaimedJob[] = [];
    while (this.held.length > 0 && (stopping || this.running < this.concurrency)) {
      const claimed = this.held.shift()!;
      // A job that waited here until half its lease ran out could be reaped while it runs.
      if (stopping || !hasHalfItsLease(claimed)) {
        unstarted.push(claimed.job);
        continue;
      }
      const reserved = this.reserveSubrequests(claimed);
      if (reserved === undefined) {
        this.claimingEnds = true;
        unstarted.push(claimed.job);
        continue;
      }
      void this.runInSlot(claimed, reserved);
    }
    await this.handBack(unstarted);
    // Without claiming ahead the loop holds no job it has no slot for: one
    // more comes only when a claim answering arrived work and the claim it
    // went out beside both found one, and it goes back at once, for any
    // worker to start.
    if (!this.policy.claimsAhead)
      await this.handBack(
        this.held.splice(0).map(({ job }) => job),
        0,
      );
  }

  /** Gives back jobs claimed but never started: their attempt does not count. */
  private async handBack(jobs: readonly ClaimedJob[], delaySeconds = this.options.handBackDelaySeconds): Promise<void> {
    if (jobs.length === 0) return;
    try {
      const { released, stale } = await releaseMany(this.db, jobs, { delaySeconds });
      this.counts.handedBack += released.length;
      this.counts.leaseLost += stale.length;
    } catch (error) {
      this.logger.error('handing back unstarted jobs failed; they run again once their leases expire', {
        jobs: jobs.length,
        ...errorFields(error),
      });
    }
  }

  /** Runs a held job in a slot until its outcome is recorded; never rejects. */
  private async runInSlot(claimed: ClaimedAt, reserved: number): Promise<void> {
    this.running += 1;
    try {
      await this.runAttempt(claimed, reserved);
    } catch (error) {
      this.logger.error('could not record how a job ended; it runs again once its lease expires', {
        jobId: claimed.job.id,
        ...errorFields(error),
      });
    } finally {
      this.slotFreed();
    }
  }

  /** The slot is free again: the loop wakes to fill it. */
  private slotFreed(): void {
    this.running -= 1;
    this.anAttemptEnded = true;
    this.wake.notify();
  }

  private async runAttempt({ job, claimSentAt, claimAnsweredAt }: ClaimedAt, reserved: number): Promise<void> {
    const definition = this.definitionOf(job);
    const { tracing } = this.options;
    const span = tracing === undefined ? undefined : startAttemptSpan(tracing, job);
    const attempt = new Attempt(
      this.db,
      job,
      claimSentAt,
      definition,
      this.logger,
      { subrequests: this.subrequests, connections: this.options.connections },
      { traceContext: span?.traceContext ?? job.traceContext, tracing },
    );
    this.attempts.add(attempt);
    this.heartbeats.add(attempt);
    const startedAt = Date.now();
    // From the claim's answer: the claim dated the attempt before that, so its start is never dated late.
    const heldMs = startedAt - claimAnsweredAt;
    let outcome: AttemptOutcome;
    try {
      outcome = await (span === undefined ? attempt.run() : span.run(() => attempt.run()));
    } finally {
      this.attempts.delete(attempt);
      this.heartbeats.delete(attempt);
    }
    if (span !== undefined) endAttemptSpan(span, outcome);
    this.policy.attemptTook(Date.now() - startedAt);
    // All but the outcome's own statement: heartbeats were counted as sent, the handler's declared ones are counted now.
    this.subrequests?.release(reserved - 1);
    this.subrequests?.countUnseen(Math.max(0, (definition.options.subrequests ?? 0) - attempt.fetchesSent));
    return this.attemptEnded(job, outcome, heldMs);
  }

  /**
   * Records how an attempt ended before its slot frees: a success goes in the
   * next group commit, without a wait (undefined); any other outcome is
   * written at once (recordOutcome), and its slot frees once it is.
   */
  private attemptEnded(job: ClaimedJob, outcome: AttemptOutcome, heldMs: number): Promise<void> | undefined {
    if (outcome.kind === 'succeeded') {
      this.completions.add({ id: job.id, leaseToken: job.leaseToken, result: outcome.result, heldMs });
      return undefined;
    }
    return this.writeOutcome(job, outcome, heldMs);
  }

  private async writeOutcome(
    job: ClaimedJob,
    outcome: Exclude<AttemptOutcome, { kind: 'succeeded' }>,
    heldMs: number,
  ): Promise<void> {
    try {
      await recordOutcome(this.db, { ...job, heldMs }, outcome, this.counts, this.options.handBackDelaySeconds);
    } finally {
      this.subrequests?.release(1);
    }
  }

  /** What runs a claimed job: its queue's delivery target when the claim gave one, else its type's handler. */
  private definitionOf(job: ClaimedJob): JobDefinition {
    return job.delivery === undefined
      ? this.registry.definitionOf(job.type)!
      : this.deliveries!.definitionFor(job.queue, job.delivery);
  }

  // Subrequests (under a cap)

  /**
   * Sets aside the most subrequests a job may still send once started: its
   * outcome, the heartbeats its lease needs before the deadline, and what
   * its handler declares, so the cap never cuts it off. 0 without a cap;
   * undefined when they do not fit.
   */
  private reserveSubrequests({ job, claimSentAt }: ClaimedAt): number | undefined {
    if (this.subrequests === undefined) return 0;
    const options = this.definitionOf(job).options;
    const lease = Math.min(job.leaseSeconds, options.leaseSeconds ?? job.leaseSeconds);
    const heartbeats = heartbeatsWithin(this.budget.msUntilAbort() + (Date.now() - claimSentAt), lease);
    const reserved = 1 + heartbeats + (options.subrequests ?? 0);
    return this.subrequests.tryReserve(reserved) ? reserved : undefined;
  }

  /**
   * How many more jobs the subrequests left can carry, each likely needing
   * its outcome, the heartbeats of the last lease seen, and the most any
   * type declares.
   */
  private affordableJobs(): number {
    if (this.subrequests === undefined) return Number.POSITIVE_INFINITY;
    return this.subrequests.affordableJobs(
      1 + heartbeatsWithin(this.budget.msUntilAbort(), this.lastLeaseSeconds) + this.mostDeclared,
    );
  }

  /** An enqueue announced to this loop must find room in it: none is left waiting for a drain that cannot take it. */
  private offerRoomToArrivals(): void {
    if (this.subrequests === undefined) return;
    this.arrivals?.setRoom(this.policy.roomForArrivals(this.affordableJobs(), this.held.length, this.claimsOut.size));
  }
}

function hasHalfItsLease({ job, claimSentAt }: ClaimedAt): boolean {
  return Date.now() - claimSentAt < (job.leaseSeconds * 1000) / 2;
}
