/**
 * Caps how many requests watch one job at once (event streams, or `?wait`
 * long-polls) in this isolate: each holds a connection and reads the job
 * every second, so a page that opens hundreds would cost hundreds of reads a
 * second. Per isolate, as Workers keep no memory shared across them: a
 * browser's requests mostly land in one, which is whom the cap is for.
 */
export class WatcherSlots {
  private readonly watching = new Map<string, number>();

  constructor(readonly perJob: number) {}

  /** Takes a slot for a watcher of `jobId`: the release function, or undefined when the job has none free. */
  acquire(jobId: string): (() => void) | undefined {
    const key = jobId.toLowerCase();
    const count = this.watching.get(key) ?? 0;
    if (count >= this.perJob) return undefined;
    this.watching.set(key, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.watching.get(key) ?? 1) - 1;
      if (left === 0) this.watching.delete(key);
      else this.watching.set(key, left);
    };
  }
}
