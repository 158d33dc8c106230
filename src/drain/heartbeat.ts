import { StaleLeaseError } from '../engine/errors';
import type { AttemptLease } from './attempt-lease';
import { errorFields, type Logger } from './logger';
import { sleep } from './sleep';

/**
 * Extends the lease every third of its length until `stop` fires (a progress
 * save in between counts as a heartbeat). It is awaited together with the
 * handler (never a free-running interval, which Workers cancel when the
 * invocation ends), so it lives exactly as long as the attempt.
 */
export async function keepLeaseAlive(lease: AttemptLease, stop: AbortSignal, log: Logger): Promise<void> {
  for (;;) {
    await sleep(lease.msUntilHeartbeat(), stop);
    if (stop.aborted) return;
    if (lease.msUntilHeartbeat() > 0) continue;
    try {
      await lease.extend();
    } catch (error) {
      // A lost lease already stopped the attempt; anything else (a dropped
      // connection) is worth another try while the lease still runs.
      if (error instanceof StaleLeaseError) return;
      log.warn('heartbeat failed; trying again', errorFields(error));
      await sleep(lease.heartbeatEveryMs / 2, stop);
    }
  }
}
