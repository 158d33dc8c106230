import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from '../engine/errors.js';
import { extendLease } from '../engine/extend-lease.js';
import type { ClaimedJob, Json } from '../engine/types.js';
import { AttemptInterruptedError } from './job-errors.js';
import { errorFields, type Logger } from './logger.js';

/** Heartbeats come at a third of the lease, so two can fail before it runs out... */
const HEARTBEATS_PER_LEASE = 3;
/** ...but not more often than this. */
const MIN_HEARTBEAT_MS = 250;

function heartbeatEveryMs(leaseSeconds: number): number {
  return Math.max(MIN_HEARTBEAT_MS, (leaseSeconds * 1000) / HEARTBEATS_PER_LEASE);
}

/** The most heartbeats a lease of `leaseSeconds` needs over `ms` (none failing). */
export function heartbeatsWithin(ms: number, leaseSeconds: number): number {
  return Math.floor(ms / heartbeatEveryMs(leaseSeconds));
}

/**
 * One attempt's hold on its job: every heartbeat and progress save presents
 * the claim's fencing token. What a heartbeat learns stops the attempt: a
 * cancel request, or a token that no longer owns the job.
 */
export class AttemptLease {
  /** True once this attempt saved progress: it moved forward, so a hand-back does not cost an attempt. */
  progressSaved = false;
  private over = false;
  /**
   * The lease the last claim or heartbeat granted, and when its statement
   * was sent: the database counts the lease from its statement's start, which
   * a slow statement can put well before its answer, so the next heartbeat is
   * timed from the sending (this machine's clock only, so no clock skew).
   */
  private grantedSeconds: number;
  private grantedAt: number;
  /** A failed heartbeat is tried again sooner than a whole period later. */
  private retryAt: number | undefined;
  private beating: Promise<void> | undefined;

  /**
   * @param leaseSeconds what each heartbeat asks for (the job type's lease, or the job's own).
   * @param claimSentAt when the claim that granted the job's own lease was sent.
   */
  constructor(
    private readonly db: Queryable,
    private readonly job: ClaimedJob,
    private leaseSeconds: number,
    claimSentAt: number,
    private readonly interrupt: (reason: AttemptInterruptedError) => void,
  ) {
    this.grantedSeconds = job.leaseSeconds;
    this.grantedAt = claimSentAt;
  }

  /** When the next heartbeat is due (ms since the epoch; never while one is on its way); a progress save counts as one. */
  get heartbeatDueAt(): number {
    if (this.beating !== undefined || this.over) return Number.POSITIVE_INFINITY;
    return this.retryAt ?? this.grantedAt + this.heartbeatEveryMs;
  }

  private get heartbeatEveryMs(): number {
    return heartbeatEveryMs(this.grantedSeconds);
  }

  /** Extends the lease (and saves progress when given). Rejects with StaleLeaseError once the job is lost. */
  async extend(options: { leaseSeconds?: number; progress?: Json } = {}): Promise<void> {
    if (this.over) throw new Error(`job ${this.job.id}: this attempt is over; its lease can no longer be extended`);
    if (options.leaseSeconds !== undefined) this.leaseSeconds = options.leaseSeconds;
    const sentAt = Date.now();
    try {
      const extended = await extendLease(this.db, this.job, {
        leaseSeconds: this.leaseSeconds,
        ...(options.progress === undefined ? {} : { progress: options.progress }),
      });
      this.grantedSeconds = this.leaseSeconds;
      this.grantedAt = sentAt;
      this.retryAt = undefined;
      if (options.progress !== undefined) this.progressSaved = true;
      if (extended.cancelRequested) this.interrupt(new AttemptInterruptedError('cancelled'));
    } catch (error) {
      if (error instanceof StaleLeaseError) this.interrupt(new AttemptInterruptedError('lease-lost'));
      throw error;
    }
  }

  /**
   * The heartbeat the schedule asks for when it is due; one at a time. A lost
   * lease already stopped the attempt; any other failure (a dropped
   * connection) is worth another try while the lease still runs.
   */
  beat(log: Logger): Promise<void> {
    if (this.over) return Promise.resolve();
    this.beating ??= this.extend()
      .catch((error: unknown) => {
        if (error instanceof StaleLeaseError) return;
        log.warn('heartbeat failed; trying again', errorFields(error));
        this.retryAt = Date.now() + this.heartbeatEveryMs / 2;
      })
      .finally(() => {
        this.beating = undefined;
      });
    return this.beating;
  }

  /**
   * Refuses further heartbeats; returns the one still on its way, if any, to
   * wait for: a handler that kept running changes nothing. (Most attempts
   * have none, and end without a promise.)
   */
  end(): Promise<void> | undefined {
    this.over = true;
    return this.beating;
  }
}
