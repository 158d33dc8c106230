/**
 * Enqueues announced to a drain that is running, so it claims again before
 * it ends instead of another drain starting beside it: a burst of enqueues
 * costs one drain, not one each. Once the drain stops claiming it closes,
 * and `announce` says so: the caller then starts a drain of its own.
 */
export class WorkArrivals {
  private arrived = false;
  private closed = false;
  private listener: (() => void) | undefined;

  /** Tells the drain that work arrived; false when it no longer claims. */
  announce(): boolean {
    if (this.closed) return false;
    this.arrived = true;
    this.listener?.();
    return true;
  }

  /** Whether work arrived since the last call. */
  take(): boolean {
    const arrived = this.arrived;
    this.arrived = false;
    return arrived;
  }

  /** The drain will claim no more: later announcements are refused. */
  close(): void {
    this.closed = true;
    this.listener = undefined;
  }

  /** Called on each announcement (the drain's wake-up). */
  onArrival(listener: () => void): void {
    this.listener = listener;
  }
}
