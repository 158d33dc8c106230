import pg from 'pg';
import type { Logger } from '../drain/index.js';
import { errorFields } from '../drain/internal.js';

/** The channel skiplock.on_jobs_inserted() notifies on every statement that inserts jobs. */
export const JOBS_CHANNEL = 'skiplock_jobs';
/**
 * What the LISTEN connection calls itself: enqueues notify only while a
 * connection of this name is open (skiplock.anyone_listening).
 */
export const LISTENER_NAME = 'skiplock_listener';
/** A lost LISTEN connection is tried again at most this often. */
const RECONNECT_EVERY_MS = 5_000;

export interface WakeupOptions {
  databaseUrl: string;
  /** The longest an idle worker waits before it looks again, notification or not. */
  pollIntervalMs: number;
  /** LISTEN for enqueues; false for polling only (a transaction pooler cannot hold a LISTEN). */
  listen: boolean;
  logger: Logger;
}

/**
 * Tells an idle worker when to look for jobs again: at once when an enqueue
 * sends a NOTIFY, else after the poll interval. Polling goes on beside
 * LISTEN because jobs also become ready without an insert (delays, retries,
 * hand-backs) and a notification sent while the connection was down is gone.
 */
export class JobWakeups {
  private readonly waiters = new Set<() => void>();
  /** A notification came while nobody waited: the next wait returns at once. */
  private pending = false;
  private listener: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private lastFailureAt = Number.NEGATIVE_INFINITY;
  private closed = false;
  private notifications = 0;

  private constructor(private readonly options: WakeupOptions) {}

  static async start(options: WakeupOptions): Promise<JobWakeups> {
    const wakeups = new JobWakeups(options);
    if (options.listen) await wakeups.connect();
    return wakeups;
  }

  /** Whether notifications arrive now (else only polling wakes the worker). */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  /**
   * How many notifications have come so far, counted as each arrives (and
   * once on connecting, for the jobs enqueued while nobody listened): a
   * claim sent after the n-th sees the jobs of the commit that sent it.
   */
  get notificationsReceived(): number {
    return this.notifications;
  }

  /** Resolves on a notification (or one that came since the last wait), the poll interval, or `signal`. */
  async next(signal: AbortSignal): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return;
    }
    this.reconnectIfLost();
    if (signal.aborted) return;
    // A plain callback rather than an AbortController combined with `signal`:
    // this wait is on the way from every notification to its claim.
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', wake);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.options.pollIntervalMs);
      signal.addEventListener('abort', wake, { once: true });
      this.waiters.add(wake);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const wake of this.waiters) wake();
    await this.connecting;
    const listener = this.listener;
    // Cleared first, so the 'end' that follows is not taken for a lost connection.
    this.listener = undefined;
    await listener?.end().catch(() => {});
  }

  private notify(): void {
    this.notifications += 1;
    if (this.waiters.size === 0) this.pending = true;
    for (const wake of this.waiters) wake();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    client.on('notification', () => this.notify());
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client, new Error('the connection ended')));
    try {
      await client.connect();
      // Enqueues notify only while a connection of this name is open.
      await client.query(`SET application_name TO ${LISTENER_NAME}`);
      await client.query(`LISTEN ${JOBS_CHANNEL}`);
    } catch (error) {
      this.lastFailureAt = Date.now();
      await client.end().catch(() => {});
      this.options.logger.warn(
        `cannot LISTEN for new jobs; polling every ${this.options.pollIntervalMs} ms`,
        errorFields(error),
      );
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.listener = client;
    // Jobs enqueued while nobody listened sent their notification to no one.
    this.notify();
  }

  private lose(client: pg.Client, error: Error): void {
    if (this.listener !== client) return;
    this.listener = undefined;
    this.lastFailureAt = Date.now();
    void client.end().catch(() => {});
    if (!this.closed)
      this.options.logger.warn('lost the LISTEN connection; polling until it is back', errorFields(error));
  }

  private reconnectIfLost(): void {
    if (!this.options.listen || this.closed || this.listener !== undefined || this.connecting !== undefined) return;
    if (Date.now() - this.lastFailureAt < RECONNECT_EVERY_MS) return;
    this.connecting = this.connect().finally(() => {
      this.connecting = undefined;
    });
  }
}
