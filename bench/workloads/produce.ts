/**
 * Producers: how jobs get into a system during a workload. Every enqueue
 * goes through the system's own API; the ledger learns of a job once its
 * enqueue call has returned (committed).
 */
import { BULK_SIZE } from '../config';
import type { JobLedger } from '../ledger';
import type { BenchJob, QueueSystem } from '../systems/types';

/** Sends `jobs` from `callers` concurrent callers, one job per call or BULK_SIZE per call. Returns the wall time in ms. */
export async function enqueueAll(
  system: QueueSystem,
  ledger: JobLedger,
  jobs: readonly BenchJob[],
  options: { callers: number; perCall: 1 | typeof BULK_SIZE },
): Promise<number> {
  const calls: BenchJob[][] = [];
  for (let i = 0; i < jobs.length; i += options.perCall) calls.push(jobs.slice(i, i + options.perCall));
  let next = 0;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: options.callers }, async () => {
      while (next < calls.length) {
        const call = calls[next++]!;
        if (call.length === 1) await system.enqueue(call[0]!);
        else await system.enqueueBatch(call);
        ledger.recordEnqueued(call.length);
      }
    }),
  );
  return performance.now() - startedAt;
}

/** Loads a backlog in bulk calls (not timed): the state a workload starts from. */
export async function preload(system: QueueSystem, ledger: JobLedger, count: number): Promise<void> {
  await enqueueAll(system, ledger, ledger.allocate(count), { callers: 4, perCall: BULK_SIZE });
}

export interface Production {
  /** Stops producing; resolves once every enqueue in flight has returned. */
  stop(): Promise<ProductionCounts>;
}

export interface ProductionCounts {
  /** Jobs whose enqueue returned. */
  sent: number;
  /** Jobs that were due (at a set rate) but not yet sent when production stopped. */
  behind: number;
}

/**
 * Enqueues single jobs from `callers` concurrent callers, either at a set
 * rate (an open loop: jobs fall due on the clock, whatever the system does)
 * or as fast as the callers go. Every enqueue call is marked in the ledger,
 * so each job's pickup latency runs from its call.
 */
export function produce(
  system: QueueSystem,
  ledger: JobLedger,
  options: { callers: number; perSecond?: number },
): Production {
  let stopping = false;
  let due = 0;
  let sent = 0;
  const startedAt = performance.now();
  const rate = options.perSecond;
  /** With a rate: how many jobs the clock has made due by now. */
  const dueByNow = () =>
    rate === undefined ? Number.POSITIVE_INFINITY : Math.floor(((performance.now() - startedAt) / 1000) * rate);

  async function caller(): Promise<void> {
    while (!stopping) {
      if (rate !== undefined && due >= dueByNow()) {
        // Sleep until the next job falls due (another caller may take it).
        await pause(startedAt + ((due + 1) / rate) * 1000 - performance.now());
        continue;
      }
      due += 1;
      const [job] = ledger.allocate(1);
      ledger.markEnqueueCall(job!.n);
      await system.enqueue(job!);
      ledger.recordEnqueued(1);
      sent += 1;
    }
  }

  const callers = Array.from({ length: options.callers }, caller);
  return {
    async stop() {
      stopping = true;
      await Promise.all(callers);
      const behind = rate === undefined ? 0 : Math.max(0, dueByNow() - due);
      return { sent, behind };
    },
  };
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
