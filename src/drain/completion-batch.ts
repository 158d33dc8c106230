import type { Queryable } from '../db/types.js';
import { completeMany, type Completion } from '../engine/complete.js';
import type { JobCounts } from './job-counts.js';
import { errorFields, type Logger } from './logger.js';
import { sleep } from '../engine/sleep.js';

/** After a failed completion, the batch is sent again this much later. */
const RETRY_AFTER_MS = 1_000;

/**
 * Completes successes in the background, one statement in flight at a time:
 * the first success goes out at once, and whatever succeeds while a
 * statement is out goes in the next one (a group commit). So an idle queue
 * completes each job at once and a busy one completes hundreds per statement,
 * and the job loop never waits for a completion before it starts the next job.
 */
export class CompletionBatch {
  private pending: Completion[] = [];
  private inFlight: Promise<void> | undefined;
  private settling = false;

  constructor(
    private readonly db: Queryable,
    private readonly counts: JobCounts,
    private readonly logger: Logger,
    /** Called with the number of completions each statement carried, once sent or given up. */
    private readonly onSent: (completions: number) => void = () => {},
  ) {}

  add(completion: Completion): void {
    this.pending.push(completion);
    this.inFlight ??= this.send();
  }

  /**
   * Waits for what is pending to be sent, trying a failing batch once more
   * but no longer retrying it: the loop is ending, and a batch that cannot be
   * sent is left to its leases, which run out so the jobs run again (never
   * lost, never completed twice).
   */
  async settle(): Promise<void> {
    this.settling = true;
    while (this.inFlight !== undefined) await this.inFlight;
  }

  private async send(): Promise<void> {
    let failures = 0;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0);
      try {
        const { completed, stale } = await completeMany(this.db, batch);
        this.counts.succeeded += completed.length;
        this.counts.leaseLost += stale.length;
        this.onSent(batch.length);
        failures = 0;
      } catch (error) {
        failures += 1;
        this.logger.error('completing jobs failed; will try again', { jobs: batch.length, ...errorFields(error) });
        this.pending.unshift(...batch);
        if (this.settling && failures > 1) {
          this.onSent(this.pending.length);
          this.pending = [];
          break;
        }
        await sleep(this.settling ? 0 : RETRY_AFTER_MS);
      }
    }
    this.inFlight = undefined;
  }
}
