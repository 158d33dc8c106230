/**
 * Wakes the job loop when an attempt ends. A wake-up that comes while nobody
 * waits (the loop is awaiting a claim) is kept, so the next wait returns at
 * once.
 *
 * The loop used to race the running attempts' promises, which leaves a
 * reaction on a long job's promise for every short job that ends while it
 * runs: memory that grows for as long as the long job does.
 */
export class WakeUp {
  private pending = false;
  private wake: (() => void) | undefined;

  notify(): void {
    if (this.wake === undefined) {
      this.pending = true;
      return;
    }
    const wake = this.wake;
    this.wake = undefined;
    wake();
  }

  /** Resolves on the next notify(), or at once if one came since the last wait. */
  next(): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  /** Gives up a wait that lost a race, so the next notify() is kept for the next wait. */
  abandon(): void {
    this.wake = undefined;
  }
}
