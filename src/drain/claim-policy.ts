import { MAX_CLAIM } from '../engine/claim-batch.js';

/**
 * Claims a loop that claims ahead keeps out at once while the queue has a
 * backlog, each of half a batch. One claim's statement runs while the
 * other's rows travel and are read, so the database is never idle between
 * claims, and a busy worker's rate is not one claim's round trip per batch.
 * Each claim steps over the rows the other holds (SKIP LOCKED); a third
 * would mostly add that.
 */
export const CLAIMS_AHEAD_AT_ONCE = 2;

/**
 * What the last claim said about the queue. A claim can come back short,
 * even empty, while jobs wait: a concurrent claim held the rows it chose
 * (SKIP LOCKED). So a short claim only means "claim again once something
 * happened", and only a full one that found jobs says there is a backlog.
 */
export interface LastClaim {
  found: boolean;
  full: boolean;
}

/** Before its first claim a loop claims at once, as if the queue had more. */
export const BEFORE_THE_FIRST_CLAIM: Readonly<LastClaim> = { found: false, full: true };

/** What the loop holds and knows when it asks whether to claim. */
export interface ClaimingState {
  lastClaim: Readonly<LastClaim>;
  /** An attempt ended or work arrived since the last claim. */
  somethingHappened: boolean;
  /** Attempts running. */
  running: number;
  /** Jobs claimed and waiting in the loop for a free slot. */
  held: number;
  /** Claims on their way, and the most jobs they may bring. */
  claimsOut: number;
  beingClaimed: number;
  /** How many more jobs the invocation's subrequests can carry (Infinity without a cap). */
  affordableJobs: number;
  /** Until running attempts are stopped (Infinity for a worker). */
  msLeft: number;
}

/**
 * The jobs a loop claims at a time: a number, or `auto` to size the batch
 * from what the loop measures (see AutoBatch).
 */
export type ClaimBatchSize = number | 'auto';

/** The most an `auto` batch grows to, in slots: the claimed-ahead jobs' leases run while they wait. */
export const AUTO_BATCH_MAX_SLOTS = 16;

export interface ClaimPolicyOptions {
  /** Attempts running at once. */
  concurrency: number;
  /** The jobs claimed at a time (JobLoopOptions.claimBatchSize); never less than `concurrency`. */
  claimBatchSize?: ClaimBatchSize | undefined;
  /** Whether the loop runs under a subrequest cap (a Worker's drain). */
  capped: boolean;
}

/**
 * How much a job loop claims, and when: pure, so it is tested apart from the loop.
 *
 * Without claiming ahead (a batch of the free slots) the loop claims for its
 * free slots, one claim at a time. Claiming ahead (a batch larger than the
 * slots), the next jobs are claimed while those on hand still keep the slots
 * busy, so no slot waits for a claim's round trip. Under a subrequest cap the
 * loop claims a whole batch once the jobs on hand fall below half a batch,
 * one claim out at a time: each is sized to what the drain can still afford,
 * which two claims out would both count as theirs. Otherwise it keeps a batch
 * on hand or on its way, claimed half a batch at a time, up to
 * CLAIMS_AHEAD_AT_ONCE claims out at once while the queue has a backlog. The
 * loop holds up to one and a half batches.
 *
 * Claims are sized to the time left as well (see AttemptPace).
 */
export class ClaimPolicy {
  readonly concurrency: number;
  private readonly capped: boolean;
  private readonly fixedBatchSize: number | undefined;
  private readonly pace = new AttemptPace();
  private claimMs: number | undefined;

  constructor({ concurrency, claimBatchSize, capped }: ClaimPolicyOptions) {
    this.concurrency = concurrency;
    this.capped = capped;
    this.fixedBatchSize = claimBatchSize === 'auto' ? undefined : Math.max(concurrency, claimBatchSize ?? concurrency);
  }

  /**
   * The batch now. An `auto` batch is the slots plus the jobs they finish
   * while one claim is out (the claim's round trip over an attempt's run
   * time, times the slots), up to AUTO_BATCH_MAX_SLOTS times the slots: a
   * database far away or jobs that take no time make the loop claim ahead,
   * long jobs do not. Until both are timed, the slots.
   */
  get claimBatchSize(): number {
    if (this.fixedBatchSize !== undefined) return this.fixedBatchSize;
    const attemptMs = this.pace.meanMs;
    if (this.claimMs === undefined || attemptMs === undefined) return this.concurrency;
    const ahead = Math.round((this.concurrency * this.claimMs) / Math.max(attemptMs, MIN_ATTEMPT_MS));
    return Math.min(this.concurrency + ahead, this.concurrency * AUTO_BATCH_MAX_SLOTS, MAX_CLAIM);
  }

  /** A batch larger than the slots: the loop holds jobs for slots not free yet. */
  get claimsAhead(): boolean {
    return this.claimBatchSize > this.concurrency;
  }

  /** The most claims out at once while the queue has a backlog. */
  get claimsAtOnce(): number {
    return this.claimsAhead && !this.capped ? CLAIMS_AHEAD_AT_ONCE : 1;
  }

  /** The most jobs one claim takes: a batch, or half of one with two claims out. */
  get claimSize(): number {
    const batch = this.claimBatchSize;
    return this.claimsAtOnce > 1 ? Math.max(this.concurrency, Math.ceil(batch / this.claimsAtOnce)) : batch;
  }

  /** Claims go out while the jobs held and being claimed are fewer than this. */
  get refillBelow(): number {
    return !this.claimsAhead ? 1 : this.claimsAtOnce > 1 ? this.claimBatchSize : this.halfBatch;
  }

  /** Running, held and being claimed at most. Without claiming ahead, the slots. */
  get holdAtMost(): number {
    return this.claimsAhead ? this.claimBatchSize + this.halfBatch : this.claimBatchSize;
  }

  private get halfBatch(): number {
    return Math.max(this.concurrency, Math.floor(this.claimBatchSize / 2));
  }

  /**
   * Whether a claim could find anything the loop does not know of: the last
   * one came back full, something happened since, or it found jobs that have
   * all ended (claiming again is how to find out whether more wait).
   */
  worthClaiming({ lastClaim, somethingHappened, running }: ClaimingState): boolean {
    return lastClaim.full || somethingHappened || (running === 0 && lastClaim.found);
  }

  /** Claims out at once now: more than one only while the queue has a backlog (the last claim found jobs and came back full). */
  claimsAllowed(lastClaim: Readonly<LastClaim>): number {
    return lastClaim.found && lastClaim.full ? this.claimsAtOnce : 1;
  }

  /**
   * How many jobs the next claim may take: half a batch or a batch, within
   * what the loop may hold and the drain afford (0 or less: no room).
   */
  roomToClaim({ held, running, beingClaimed, affordableJobs }: ClaimingState): number {
    return Math.min(this.claimSize, this.holdAtMost - held - running - beingClaimed, affordableJobs);
  }

  /** The size of the claim to send now, or 0 when none should go out. */
  nextClaim(state: ClaimingState): number {
    if (!this.worthClaiming(state)) return 0;
    if (state.claimsOut >= this.claimsAllowed(state.lastClaim)) return 0;
    if (state.held + state.beingClaimed >= this.refillBelow) return 0;
    const room = this.roomToClaim(state);
    if (room <= 0) return 0;
    return this.pace.claimSize(room, this.concurrency, state.msLeft);
  }

  /**
   * How many enqueues may be announced to a capped drain (WorkArrivals): what
   * it can afford beyond the jobs it holds, less a claim's worth of slots
   * while one is out. None is left waiting for a drain that cannot take it.
   */
  roomForArrivals(affordableJobs: number, held: number, claimsOut: number): number {
    return Math.max(0, affordableJobs - held - (claimsOut === 0 ? 0 : this.concurrency));
  }

  /** An attempt ran `ms` (its handler, from start to outcome). */
  attemptTook(ms: number): void {
    this.pace.record(ms);
  }

  /** A claim took `ms` from sending to its answer. */
  claimTook(ms: number): void {
    this.claimMs = movingMean(this.claimMs, ms);
  }
}

/**
 * Sizes claims to the time left: never more than asked (nor MAX_CLAIM), and,
 * once attempts have been timed, no more than `concurrency` slots can finish
 * before the deadline (at least one, so a long job still gets its turn).
 */
class AttemptPace {
  meanMs: number | undefined;

  record(ms: number): void {
    this.meanMs = movingMean(this.meanMs, ms);
  }

  claimSize(wanted: number, concurrency: number, msLeft: number): number {
    const size = Math.min(wanted, MAX_CLAIM);
    if (this.meanMs === undefined || this.meanMs <= 0 || !Number.isFinite(msLeft)) return size;
    return Math.max(1, Math.min(size, Math.floor((concurrency * msLeft) / this.meanMs)));
  }
}

/** An attempt's run time as `auto` counts it at least: a clock that reads 0 ms for a no-op job says little. */
const MIN_ATTEMPT_MS = 0.1;

/** A mean that follows the recent values. */
function movingMean(mean: number | undefined, value: number): number {
  return mean === undefined ? value : 0.8 * mean + 0.2 * value;
}
