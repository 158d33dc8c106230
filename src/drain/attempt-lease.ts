import type { Queryable } from '../db/types';
import { StaleLeaseError } from '../engine/errors';
import { extendLease } from '../engine/extend-lease';
import type { ClaimedJob, Json } from '../engine/types';
import { AttemptInterrupted } from './job-errors';

/** Heartbeats come at a third of the lease, so two can fail before it runs out... */
const HEARTBEATS_PER_LEASE = 3;
/** ...but not more often than this. */
const MIN_HEARTBEAT_MS = 250;

/**
 * One attempt's hold on its job: every heartbeat and progress save presents
 * the claim's fencing token. What a heartbeat learns stops the attempt: a
 * cancel request, or a token that no longer owns the job.
 */
export class AttemptLease {
  /** True once this attempt saved progress: it moved forward, so a hand-back does not cost an attempt. */
  progressSaved = false;
  private over = false;
  /** The lease the last claim or heartbeat granted, and when: the next heartbeat is due within it. */
  private grantedSeconds: number;
  private grantedAt = Date.now();

  /** @param leaseSeconds what each heartbeat asks for (the job type's lease, or the job's own). */
  constructor(
    private readonly db: Queryable,
    private readonly job: ClaimedJob,
    private leaseSeconds: number,
    private readonly interrupt: (reason: AttemptInterrupted) => void,
  ) {
    // The claim granted the job's own lease, whatever the job type asks for.
    this.grantedSeconds = job.leaseSeconds;
  }

  get heartbeatEveryMs(): number {
    return Math.max(MIN_HEARTBEAT_MS, (this.grantedSeconds * 1000) / HEARTBEATS_PER_LEASE);
  }

  /** Until the next heartbeat is due; a progress save counts as one. */
  msUntilHeartbeat(): number {
    return Math.max(0, this.grantedAt + this.heartbeatEveryMs - Date.now());
  }

  /** Extends the lease (and saves progress when given). Rejects with StaleLeaseError once the job is lost. */
  async extend(options: { leaseSeconds?: number; progress?: Json } = {}): Promise<void> {
    if (this.over) throw new Error(`job ${this.job.id}: this attempt is over; its lease can no longer be extended`);
    if (options.leaseSeconds !== undefined) this.leaseSeconds = options.leaseSeconds;
    try {
      const extended = await extendLease(this.db, this.job, {
        leaseSeconds: this.leaseSeconds,
        ...(options.progress === undefined ? {} : { progress: options.progress }),
      });
      this.grantedSeconds = this.leaseSeconds;
      this.grantedAt = Date.now();
      if (options.progress !== undefined) this.progressSaved = true;
      if (extended.cancelRequested) this.interrupt(new AttemptInterrupted('cancelled'));
    } catch (error) {
      if (error instanceof StaleLeaseError) this.interrupt(new AttemptInterrupted('lease-lost'));
      throw error;
    }
  }

  /** Refuses further heartbeats: a handler that kept running after its attempt ended changes nothing. */
  end(): void {
    this.over = true;
  }
}
