import type { BenchJob, BenchPayload, Inventory, JobHandler } from './systems/types';

export interface Pickup {
  /** performance.now() when the enqueue call began. */
  calledAt: number;
  ms: number;
}

export interface GateResult {
  passed: boolean;
  /** Why it failed; empty when it passed. */
  problems: string[];
  /**
   * Jobs that ran but were still marked running after the library's own
   * graceful stop: nothing is lost, but the library would run them again
   * once their lease or lock expires. Shown beside the figure, not hiding it.
   */
  unrecordedCompletions: number;
}

/** The note a figure carries when its run left completions unrecorded. */
export const UNRECORDED_FLAG =
  "jobs that ran were left marked running by the library's graceful stop (they would run again)";

/**
 * Everything one run enqueued and ran, and the correctness gate over it.
 * Every job carries a number `n`; the handler (the same async no-op for
 * every system) counts its runs per number and notes when each started.
 * After the workers stop gracefully, the gate compares that with the
 * database: nothing lost (each job ran or still waits), nothing run twice,
 * nothing left running or failed, and, where the system keeps finished
 * jobs, exactly the jobs that ran recorded as succeeded, each in one attempt.
 */
export class JobLedger {
  private nextN = 0;
  private committed = 0;
  private finishedBeforehand = 0;
  private readonly runs = new Map<number, number>();
  private readonly enqueueCalledAt = new Map<number, number>();
  private duplicates = 0;
  private strangers = 0;
  private waiters: Array<{ target: number; wake: () => void }> = [];
  /** Job numbers in the order their handler started, and when (performance.now()). */
  readonly startOrder: number[] = [];
  readonly startTimes: number[] = [];

  /** A ledger for a run that starts from a copy of a backlog of `jobs` waiting jobs, numbered from 0. */
  static fromBacklog(jobs: number): JobLedger {
    const ledger = new JobLedger();
    ledger.reserve(jobs);
    ledger.recordEnqueued(jobs);
    return ledger;
  }

  /** New jobs with numbers no other job of this run has. */
  allocate(count: number, tenant?: string): BenchJob[] {
    const jobs = Array.from({ length: count }, (_, i) => ({
      n: this.nextN + i,
      ...(tenant === undefined ? {} : { tenant }),
    }));
    this.nextN += count;
    return jobs;
  }

  /** Numbers for jobs a system inserts itself (`fill`); returns the first. */
  reserve(count: number): number {
    const first = this.nextN;
    this.nextN += count;
    return first;
  }

  /** Call once an enqueue has returned: these jobs are committed. */
  recordEnqueued(count: number): void {
    this.committed += count;
  }

  /** Finished jobs that were in the database before the run (the depth backlog). */
  recordFinishedBeforehand(count: number): void {
    this.finishedBeforehand += count;
  }

  /** When the enqueue call for job `n` began: pickup latency runs from here. */
  markEnqueueCall(n: number): void {
    this.enqueueCalledAt.set(n, performance.now());
  }

  get enqueued(): number {
    return this.committed;
  }

  /** Jobs whose handler ran at least once. */
  get started(): number {
    return this.runs.size;
  }

  readonly handler: JobHandler = async (payload: BenchPayload) => {
    const at = performance.now();
    if (payload.n < 0 || payload.n >= this.nextN) {
      this.strangers += 1;
      return;
    }
    const runs = (this.runs.get(payload.n) ?? 0) + 1;
    this.runs.set(payload.n, runs);
    if (runs > 1) {
      this.duplicates += 1;
      return;
    }
    this.startOrder.push(payload.n);
    this.startTimes.push(at);
    if (this.waiters.length > 0) this.wakeWaiters();
  };

  /** Resolves true once `target` distinct jobs have started, false if `timeoutMs` passes first. */
  whenStarted(target: number, timeoutMs: number): Promise<boolean> {
    if (this.started >= target) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(this.started >= target);
      }, timeoutMs);
      const waiter = {
        target,
        wake: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** For every started job whose enqueue call was marked: when the call began, and the ms from it to the handler's start. */
  pickups(): Pickup[] {
    const pickups: Pickup[] = [];
    for (let i = 0; i < this.startOrder.length; i++) {
      const calledAt = this.enqueueCalledAt.get(this.startOrder[i]!);
      if (calledAt !== undefined) pickups.push({ calledAt, ms: this.startTimes[i]! - calledAt });
    }
    return pickups;
  }

  /** Jobs per second between the first start at or after `from` and the last start, counted by starts. */
  startRate(fromIndex = 0, toIndex = this.startTimes.length - 1): number {
    const span = this.startTimes[toIndex]! - this.startTimes[fromIndex]!;
    return span > 0 ? ((toIndex - fromIndex) * 1000) / span : Number.NaN;
  }

  gate(inventory: Inventory): GateResult {
    const problems: string[] = [];
    const ran = this.started;
    if (this.duplicates > 0) problems.push(`${this.duplicates} extra runs of jobs that had already run`);
    if (this.strangers > 0) problems.push(`${this.strangers} handler calls for jobs this run never enqueued`);
    if (inventory.failed > 0) problems.push(`${inventory.failed} jobs failed (the handler never throws)`);
    if (inventory.waiting !== this.committed - ran) {
      problems.push(`${this.committed} enqueued and ${ran} ran, but ${inventory.waiting} wait`);
    }
    if (inventory.succeeded !== null && inventory.succeeded - this.finishedBeforehand + inventory.running !== ran) {
      problems.push(
        `${ran} ran, but ${inventory.succeeded - this.finishedBeforehand} are recorded as succeeded and ${inventory.running} as running`,
      );
    }
    if (inventory.redelivered !== null && inventory.redelivered > 0) {
      problems.push(`${inventory.redelivered} succeeded jobs took more than one attempt`);
    }
    return { passed: problems.length === 0, problems, unrecordedCompletions: inventory.running };
  }

  private wakeWaiters(): void {
    const started = this.started;
    const ready = this.waiters.filter((waiter) => started >= waiter.target);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((waiter) => started < waiter.target);
    for (const waiter of ready) waiter.wake();
  }
}
