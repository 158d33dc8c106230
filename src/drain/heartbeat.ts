import { StaleLeaseError } from '../engine/errors.js';
import type { AttemptLease } from './attempt-lease.js';
import { errorFields, type Logger } from './logger.js';

/**
 * Extends an attempt's lease every third of its length until stopped (a
 * progress save in between counts as a heartbeat). `run()` is awaited
 * together with the handler (never a free-running interval, which Workers
 * cancel when the invocation ends), so it lives exactly as long as the
 * attempt. Stopped by a flag and its own timer rather than an AbortSignal:
 * every attempt starts and stops one, and most end long before a beat.
 */
export class Heartbeat {
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly lease: AttemptLease,
    private readonly log: Logger,
  ) {}

  /** Beats until stop(), or until the lease is lost. Never rejects. */
  async run(): Promise<void> {
    for (;;) {
      await this.pause(this.lease.msUntilHeartbeat());
      if (this.stopped) return;
      if (this.lease.msUntilHeartbeat() > 0) continue;
      try {
        await this.lease.extend();
      } catch (error) {
        // A lost lease already stopped the attempt; anything else (a dropped
        // connection) is worth another try while the lease still runs.
        if (error instanceof StaleLeaseError) return;
        this.log.warn('heartbeat failed; trying again', errorFields(error));
        await this.pause(this.lease.heartbeatEveryMs / 2);
      }
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake?.();
  }

  private pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }
}
