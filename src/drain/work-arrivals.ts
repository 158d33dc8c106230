/**
 * Enqueues announced to a drain that is running, so it claims again before
 * it ends instead of another drain starting beside it: a burst of enqueues
 * costs one drain, not one each. Once the drain stops claiming it closes,
 * and `announce` says so: the caller then starts a drain of its own.
 *
 * Only flags: an announcement comes from another request, and on Workers one
 * request may not resolve or touch what another's I/O waits on. The drain
 * looks for announcements itself, between its own events.
 */
export class WorkArrivals {
  private arrived = 0;
  private room = Number.POSITIVE_INFINITY;
  private closed = false;

  /** Tells the drain that work arrived; false when it no longer claims, or has no room for more. */
  announce(): boolean {
    if (this.closed || this.arrived >= this.room) return false;
    this.arrived += 1;
    return true;
  }

  /** Whether work arrived since the last call. */
  take(): boolean {
    const arrived = this.arrived > 0;
    this.arrived = 0;
    return arrived;
  }

  /** How many more jobs the drain can take on (its subrequests left): announcements past it are refused. */
  setRoom(jobs: number): void {
    this.room = jobs;
  }

  /** The drain will claim no more: later announcements are refused. */
  close(): void {
    this.closed = true;
  }
}
