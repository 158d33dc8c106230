import { describe, expect, it } from 'vitest';
import { MAX_CLAIM } from '../engine/claim-batch.js';
import {
  AUTO_BATCH_MAX_SLOTS,
  BEFORE_THE_FIRST_CLAIM,
  CLAIMS_AHEAD_AT_ONCE,
  type ClaimBatchSize,
  ClaimPolicy,
  type ClaimingState,
} from './claim-policy.js';

const BACKLOG = { found: true, full: true };
const SHORT = { found: true, full: false };
const EMPTY = { found: false, full: false };

/** A loop that holds nothing, has nothing out, and is neither capped nor timed, with `changes` on top. */
function state(changes: Partial<ClaimingState> = {}): ClaimingState {
  return {
    lastClaim: BACKLOG,
    somethingHappened: false,
    running: 0,
    held: 0,
    claimsOut: 0,
    beingClaimed: 0,
    affordableJobs: Number.POSITIVE_INFINITY,
    msLeft: Number.POSITIVE_INFINITY,
    ...changes,
  };
}

describe('ClaimPolicy: batch size', () => {
  it('claims the free slots by default, and never a batch smaller than the slots', () => {
    for (const claimBatchSize of [undefined, 3]) {
      const policy = new ClaimPolicy({ concurrency: 5, claimBatchSize, capped: false });
      expect(policy.claimBatchSize).toBe(5);
      expect(policy.claimsAhead).toBe(false);
      expect(policy.claimSize).toBe(5);
      expect(policy.claimsAtOnce).toBe(1);
      expect(policy.holdAtMost).toBe(5);
    }
  });

  it('without claiming ahead, claims only when nothing is held or being claimed, and only for the free slots', () => {
    const policy = new ClaimPolicy({ concurrency: 5, capped: false });
    expect(policy.refillBelow).toBe(1);
    expect(policy.nextClaim(state())).toBe(5);
    expect(policy.nextClaim(state({ running: 3 }))).toBe(2);
    expect(policy.nextClaim(state({ running: 5 }))).toBe(0);
    expect(policy.nextClaim(state({ held: 1 }))).toBe(0);
    expect(policy.nextClaim(state({ beingClaimed: 1, claimsOut: 1 }))).toBe(0);
  });
});

describe('ClaimPolicy: claiming ahead in halves (no subrequest cap)', () => {
  const policy = new ClaimPolicy({ concurrency: 2, claimBatchSize: 25, capped: false });

  it('claims half a batch at a time, up to CLAIMS_AHEAD_AT_ONCE claims out, and holds up to one and a half batches', () => {
    expect(policy.claimsAhead).toBe(true);
    expect(policy.claimsAtOnce).toBe(CLAIMS_AHEAD_AT_ONCE);
    expect(policy.claimSize).toBe(13);
    expect(policy.refillBelow).toBe(25);
    expect(policy.holdAtMost).toBe(25 + 12);
  });

  it('never claims less than the slots in one claim, however small the batch', () => {
    const small = new ClaimPolicy({ concurrency: 8, claimBatchSize: 10, capped: false });
    expect(small.claimSize).toBe(8);
    expect(small.holdAtMost).toBe(10 + 8);
  });

  it('sends one claim first, a second beside it only once a claim came back full, and stops at a batch on hand or on its way', () => {
    // The first claim: the queue may be idle, so one claim alone.
    expect(policy.nextClaim(state({ lastClaim: BEFORE_THE_FIRST_CLAIM }))).toBe(13);
    expect(policy.nextClaim(state({ lastClaim: BEFORE_THE_FIRST_CLAIM, claimsOut: 1, beingClaimed: 13 }))).toBe(0);
    // It came back full: the jobs are held, and two claims go out.
    expect(policy.nextClaim(state({ held: 13 }))).toBe(13);
    expect(policy.nextClaim(state({ held: 12, running: 2, claimsOut: 1, beingClaimed: 13 }))).toBe(0);
    expect(policy.nextClaim(state({ held: 11, running: 2, claimsOut: 1, beingClaimed: 13 }))).toBe(11);
    expect(policy.nextClaim(state({ held: 5, running: 2, claimsOut: 1, beingClaimed: 13 }))).toBe(13);
    // Never a third at once.
    expect(policy.nextClaim(state({ held: 0, running: 2, claimsOut: 2, beingClaimed: 2 }))).toBe(0);
  });

  it('keeps one claim out at a time once a claim comes back short', () => {
    expect(policy.claimsAllowed(BACKLOG)).toBe(2);
    expect(policy.claimsAllowed(SHORT)).toBe(1);
    expect(policy.claimsAllowed(EMPTY)).toBe(1);
    expect(policy.nextClaim(state({ lastClaim: SHORT, somethingHappened: true, claimsOut: 1, beingClaimed: 13 }))).toBe(
      0,
    );
    expect(policy.nextClaim(state({ lastClaim: SHORT, somethingHappened: true }))).toBe(13);
  });

  it('claims no more than it may still hold', () => {
    expect(policy.roomToClaim(state({ held: 20, running: 2, beingClaimed: 4 }))).toBe(11);
    expect(policy.nextClaim(state({ held: 20, running: 2, beingClaimed: 4, claimsOut: 1 }))).toBe(11);
  });
});

describe('ClaimPolicy: whole batches under a subrequest cap', () => {
  const policy = new ClaimPolicy({ concurrency: 2, claimBatchSize: 25, capped: true });

  it('claims a whole batch, one claim out at a time, once fewer than half a batch are on hand', () => {
    expect(policy.claimsAtOnce).toBe(1);
    expect(policy.claimSize).toBe(25);
    expect(policy.refillBelow).toBe(12);
    expect(policy.holdAtMost).toBe(25 + 12);
    expect(policy.claimsAllowed(BACKLOG)).toBe(1);
    expect(policy.nextClaim(state({ lastClaim: BEFORE_THE_FIRST_CLAIM }))).toBe(25);
    expect(policy.nextClaim(state({ held: 12, running: 2 }))).toBe(0);
    expect(policy.nextClaim(state({ held: 11, running: 2 }))).toBe(24);
    expect(policy.nextClaim(state({ held: 0, running: 2, claimsOut: 1, beingClaimed: 25 }))).toBe(0);
  });

  it('claims no more jobs than the subrequests left can carry, and none when they carry none', () => {
    expect(policy.nextClaim(state({ affordableJobs: 7 }))).toBe(7);
    expect(policy.nextClaim(state({ affordableJobs: 0 }))).toBe(0);
  });

  it('takes announcements only for jobs it can afford beyond those it holds, less a claim of slots while one is out', () => {
    expect(policy.roomForArrivals(30, 10, 0)).toBe(20);
    expect(policy.roomForArrivals(30, 10, 1)).toBe(18);
    expect(policy.roomForArrivals(5, 10, 1)).toBe(0);
  });
});

describe('ClaimPolicy: when a claim is worth sending', () => {
  const policy = new ClaimPolicy({ concurrency: 4, capped: false });

  it('claims after a full claim, after something happened, and once the jobs of a short claim have all ended', () => {
    expect(policy.worthClaiming(state({ lastClaim: BEFORE_THE_FIRST_CLAIM }))).toBe(true);
    expect(policy.worthClaiming(state({ lastClaim: BACKLOG, running: 4 }))).toBe(true);
    expect(policy.worthClaiming(state({ lastClaim: SHORT, running: 1 }))).toBe(false);
    expect(policy.worthClaiming(state({ lastClaim: SHORT, running: 1, somethingHappened: true }))).toBe(true);
    expect(policy.worthClaiming(state({ lastClaim: SHORT, running: 0 }))).toBe(true);
    expect(policy.worthClaiming(state({ lastClaim: EMPTY, running: 0 }))).toBe(false);
    expect(policy.worthClaiming(state({ lastClaim: EMPTY, running: 0, somethingHappened: true }))).toBe(true);
  });

  it('sends none that is not worth it, whatever room there is', () => {
    expect(policy.nextClaim(state({ lastClaim: EMPTY }))).toBe(0);
    expect(policy.nextClaim(state({ lastClaim: EMPTY, somethingHappened: true }))).toBe(4);
  });
});

describe('ClaimPolicy: the attempt pace', () => {
  it('claims what there is room for until attempts have been timed, and never more than MAX_CLAIM', () => {
    const policy = new ClaimPolicy({ concurrency: 5, claimBatchSize: 4000, capped: false });
    expect(policy.claimSize).toBe(2000);
    expect(policy.nextClaim(state({ msLeft: 1 }))).toBe(MAX_CLAIM);
  });

  it('claims no more than the slots can finish before the deadline, at the mean attempt time so far', () => {
    const policy = new ClaimPolicy({ concurrency: 2, claimBatchSize: 100, capped: true });
    policy.attemptTook(1000);
    expect(policy.nextClaim(state({ msLeft: 3000 }))).toBe(6);
    // The mean leans to the recent: 0.8 of it stays, 0.2 comes from the new time.
    policy.attemptTook(2000);
    expect(policy.nextClaim(state({ msLeft: 6000 }))).toBe(10);
  });

  it('still claims one job when none would finish in time, and does not pace a worker without a deadline', () => {
    const policy = new ClaimPolicy({ concurrency: 2, claimBatchSize: 100, capped: true });
    policy.attemptTook(10_000);
    expect(policy.nextClaim(state({ msLeft: 100 }))).toBe(1);
    expect(policy.nextClaim(state({ msLeft: Number.POSITIVE_INFINITY }))).toBe(100);
  });
});

describe('ClaimPolicy: an auto batch', () => {
  const timed = (claimMs: number, attemptMs: number, claimBatchSize: ClaimBatchSize = 'auto') => {
    const policy = new ClaimPolicy({ concurrency: 25, claimBatchSize, capped: true });
    policy.claimTook(claimMs);
    policy.attemptTook(attemptMs);
    return policy;
  };

  it('claims the slots until a claim and an attempt have been timed', () => {
    const policy = new ClaimPolicy({ concurrency: 25, claimBatchSize: 'auto', capped: true });
    expect(policy.claimBatchSize).toBe(25);
    policy.claimTook(50);
    expect(policy.claimBatchSize).toBe(25);
    expect(policy.claimsAhead).toBe(false);
  });

  it('adds the jobs the slots finish during one claim, up to AUTO_BATCH_MAX_SLOTS times the slots', () => {
    // 50 ms I/O jobs with the database 50 ms away: a second batch's worth.
    expect(timed(50, 50).claimBatchSize).toBe(50);
    expect(timed(50, 50).claimsAhead).toBe(true);
    expect(timed(50, 50).holdAtMost).toBe(75);
    // No-op jobs (a clock that reads 0 ms), even with the database close by.
    expect(timed(2, 0).claimBatchSize).toBe(25 * AUTO_BATCH_MAX_SLOTS);
    // Long jobs: nothing is claimed ahead, so no lease runs while its job waits here.
    expect(timed(50, 10_000).claimBatchSize).toBe(25);
    expect(timed(50, 10_000).claimsAhead).toBe(false);
  });

  it('follows the recent claims and attempts, and leaves a batch given as a number alone', () => {
    const policy = timed(50, 50);
    for (let i = 0; i < 30; i++) policy.attemptTook(5_000);
    expect(policy.claimBatchSize).toBe(25);
    expect(timed(50, 0, 30).claimBatchSize).toBe(30);
  });
});
