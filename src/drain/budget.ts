import { AttemptInterruptedError } from './job-errors.js';

/** Claiming stops this share of the budget before its end... */
const CLAIM_MARGIN_SHARE = 0.2;
/** ...and at least this long before it (capped at half of a short budget). */
const MIN_CLAIM_MARGIN_MS = 5_000;
/** What is still running is stopped this long before the end, so handing it back fits in the budget. */
const HAND_BACK_RESERVE_MS = 2_000;
const HAND_BACK_RESERVE_SHARE = 0.1;

/**
 * The time one drain may take. Two moments matter: when claiming stops
 * (well before the end, so claimed jobs can still run) and when running
 * jobs are stopped (`signal`, just before the end, so they can be handed
 * back in time).
 *
 * On Workers `Date.now()` advances only across I/O, so `claiming` is only
 * meaningful right after an await of I/O; that is where the drain asks.
 * Timers do fire on time, which is what `signal` rests on.
 */
export class DrainBudget {
  private stopClaimingAt: number;
  private abortAt = Number.POSITIVE_INFINITY;
  private abortTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly deadline = new AbortController();
  private readonly claimingEnd = new AbortController();
  private readonly deadlineListeners = new Set<(reason: AttemptInterruptedError) => void>();

  /** Fires (reason: AttemptInterruptedError 'deadline') when running attempts must stop. */
  readonly signal: AbortSignal = this.deadline.signal;
  /** Fires when `stop()` is called, so a loop waiting for work wakes up and ends. */
  readonly stopped: AbortSignal = this.claimingEnd.signal;

  /** @param budgetMs the whole budget; Infinity for a worker that runs until stopped. */
  constructor(budgetMs: number) {
    const now = Date.now();
    if (!Number.isFinite(budgetMs)) {
      this.stopClaimingAt = Number.POSITIVE_INFINITY;
      return;
    }
    const claimMargin = Math.min(budgetMs / 2, Math.max(MIN_CLAIM_MARGIN_MS, budgetMs * CLAIM_MARGIN_SHARE));
    this.stopClaimingAt = now + budgetMs - claimMargin;
    this.abortIn(budgetMs - Math.min(HAND_BACK_RESERVE_MS, budgetMs * HAND_BACK_RESERVE_SHARE));
  }

  /** Whether new jobs may still be claimed. Ask right after I/O. */
  get claiming(): boolean {
    return !this.claimingEnd.signal.aborted && !this.deadline.signal.aborted && Date.now() < this.stopClaimingAt;
  }

  /** Milliseconds until running attempts are stopped (Infinity for an open-ended worker). */
  msUntilAbort(): number {
    return Math.max(0, this.abortAt - Date.now());
  }

  /** Graceful stop: claim nothing more, and stop what still runs after `graceMs`. */
  stop(graceMs: number): void {
    this.stopClaimingAt = Number.NEGATIVE_INFINITY;
    this.claimingEnd.abort();
    if (graceMs < this.msUntilAbort()) this.abortIn(graceMs);
  }

  /**
   * Calls `listener` when running attempts must stop (at once if they must
   * already); returns the unsubscribe. A plain set, because an attempt
   * subscribes and unsubscribes once per job, where combining AbortSignals
   * (AbortSignal.any) cost more than a no-op job's whole run.
   */
  onDeadline(listener: (reason: AttemptInterruptedError) => void): () => void {
    if (this.deadline.signal.aborted) {
      listener(this.deadline.signal.reason as AttemptInterruptedError);
      return () => {};
    }
    this.deadlineListeners.add(listener);
    return () => this.deadlineListeners.delete(listener);
  }

  /** Clears the timer; call when the drain is over. */
  dispose(): void {
    clearTimeout(this.abortTimer);
  }

  private abortIn(ms: number): void {
    clearTimeout(this.abortTimer);
    this.abortAt = Date.now() + ms;
    this.abortTimer = setTimeout(() => {
      const reason = new AttemptInterruptedError('deadline');
      this.deadline.abort(reason);
      for (const listener of this.deadlineListeners) listener(reason);
      this.deadlineListeners.clear();
    }, ms);
  }
}
