/** What the schedule beats: an attempt's lease. */
export interface Beating {
  /** When the next heartbeat is due (ms since the epoch); Infinity while one is on its way. */
  readonly heartbeatDueAt: number;
  /** Sends the heartbeat; settles when it is done, never rejects. */
  beat(): Promise<void>;
}

/**
 * The heartbeats of every attempt a loop runs, on one timer set for the
 * earliest that is due. Attempts join and leave it for the price of a set
 * operation, which matters when most jobs end long before their first beat.
 * Each beat is awaited by its attempt when it ends (never left to run free,
 * which Workers cancel when the invocation ends), and `stop()` clears the
 * timer when the loop ends.
 */
export class HeartbeatSchedule {
  private readonly attempts = new Set<Beating>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  add(attempt: Beating): void {
    this.attempts.add(attempt);
    this.wakeBy(attempt.heartbeatDueAt);
  }

  delete(attempt: Beating): void {
    this.attempts.delete(attempt);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private wakeBy(at: number): void {
    if (at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.beatThoseDue(), Math.max(0, at - Date.now()));
  }

  private beatThoseDue(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    for (const attempt of this.attempts) {
      const dueAt = attempt.heartbeatDueAt;
      if (dueAt <= now) {
        void attempt.beat().then(() => {
          if (this.attempts.has(attempt)) this.wakeBy(attempt.heartbeatDueAt);
        });
      } else {
        this.wakeBy(dueAt);
      }
    }
  }
}
