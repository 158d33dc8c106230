import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { SubrequestBudget } from '../drain/subrequest-budget.js';
import type { Queryable } from '../db/types.js';
import { readyBacklog } from '../engine/ready-backlog.js';
import type { ObjectNamespace } from './object-namespace.js';

/** The SKIPLOCK_DRAINER binding: a Durable Object namespace of the class `skiplock.Drainer` (see drainer.ts). */
export type DrainerNamespace<Id = unknown> = ObjectNamespace<Id>;

/** The helpers' names: `drainer-1` up to `drainer-<fanout - 1>`, the same in every isolate. */
export const drainerName = (index: number) => `drainer-${index}`;

/**
 * Fan-out: a drain whose claim comes back full starts helper drains, each a
 * Durable Object alarm, so an invocation of its own with its own budget,
 * subrequests and connections. How many: one for each full batch still
 * waiting once this drain has taken its own, up to `fanout - 1`. A backlog
 * can grow after the drain began (a burst of enqueues arriving while it
 * runs), so while its claims keep coming back full and fewer than
 * `fanout - 1` helpers run, the drain counts the backlog again, at most once
 * every RECOUNT_AFTER_MS (twice that after a count that called for no more,
 * and so on, so a backlog that stays small spends few subrequests on counts:
 * the Free plan has 50), and starts the helpers it now calls for, all at
 * once (each start is a round trip to a Durable Object). A helper
 * drains again as long as it finds work and stops when it finds none, so
 * fan-out ends with the backlog. Starting a helper that runs already changes
 * nothing, so drains in other isolates may all ask.
 *
 * The helpers are reachable only through the binding: no URL, no request
 * from outside, can start one.
 */
export class FanOut {
  private starting: Promise<void> | undefined;
  private started = 0;
  private countedAt = Number.NEGATIVE_INFINITY;
  /** Doubles after each count that calls for no more helpers: a backlog that stays small costs few counts. */
  private recountAfterMs = RECOUNT_AFTER_MS;

  constructor(
    private readonly drainers: DrainerNamespace,
    private readonly db: Queryable,
    private readonly subrequests: SubrequestBudget,
    private readonly options: {
      fanout: number;
      concurrency: number;
      types: readonly string[];
      deliveryTargets: readonly string[];
    },
  ) {}

  /** For the drain's `onBacklog`: counts the backlog and starts helpers in the background, unless it did so lately. */
  readonly onBacklog = (): void => {
    if (this.starting !== undefined || this.started >= this.options.fanout - 1) return;
    if (Date.now() - this.countedAt < this.recountAfterMs) return;
    this.countedAt = Date.now();
    this.starting = this.startHelpers()
      .catch((error: unknown) => {
        jsonConsoleLogger.error(
          'could not start helper drains; this drain goes on with those it has',
          errorFields(error),
        );
      })
      .finally(() => {
        this.starting = undefined;
      });
  };

  /** How many helpers it started, once the starts on their way are sent. */
  async helpersStarted(): Promise<number> {
    await this.starting;
    return this.started;
  }

  private async startHelpers(): Promise<void> {
    const { fanout, concurrency, types, deliveryTargets } = this.options;
    const most = fanout - 1;
    const more = most - this.started;
    // The backlog's count and a start per helper, set aside first so no job's reserve takes them;
    // each is handed back just before it is sent (and counted), so none counts twice.
    if (more < 1 || !this.subrequests.tryReserve(1 + more)) return;
    let setAside = 1 + more;
    const sendOne = () => {
      this.subrequests.release(1);
      setAside -= 1;
    };
    try {
      sendOne();
      const ready = await readyBacklog(this.db, { types, deliveryTargets, limit: more * concurrency });
      const wanted = Math.min(most, this.started + Math.floor(ready / concurrency));
      if (wanted === this.started) this.recountAfterMs *= 2;
      const indexes = Array.from({ length: wanted - this.started }, (_, offset) => this.started + 1 + offset);
      for (let sent = 0; sent < indexes.length; sent++) {
        sendOne();
        this.subrequests.spend();
      }
      // At once: a Durable Object may be a long way from this drain, and each start is a round trip to it.
      const starts = await Promise.allSettled(indexes.map((index) => this.startHelper(index)));
      const failed = starts.findIndex((start) => start.status === 'rejected');
      // Those after a failed one may run too; starting them again at the next count changes nothing.
      this.started = failed < 0 ? wanted : indexes[failed]! - 1;
      if (failed >= 0) throw (starts[failed] as PromiseRejectedResult).reason;
    } finally {
      this.subrequests.release(setAside);
    }
  }

  private async startHelper(index: number): Promise<void> {
    const stub = this.drainers.get(this.drainers.idFromName(drainerName(index)));
    const response = await stub.fetch('https://skiplock-drainer/start', { method: 'POST' });
    if (!response.ok)
      throw new Error(`helper ${drainerName(index)} answered ${response.status}: ${await response.text()}`);
  }
}

/** How long a drain first waits before counting the backlog again for more helpers. */
const RECOUNT_AFTER_MS = 1000;
