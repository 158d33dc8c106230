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
 * waiting once this drain has taken its own, up to `fanout - 1`. A helper
 * drains again as long as it finds work and stops when it finds none, so
 * fan-out ends with the backlog. Starting a helper that runs already changes
 * nothing, so drains in other isolates may all ask.
 *
 * The helpers are reachable only through the binding: no URL, no request
 * from outside, can start one.
 */
export class FanOut {
  private starting: Promise<number> | undefined;

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

  /** For the drain's `onBacklog`: starts the helpers in the background, once. */
  readonly onBacklog = (): void => {
    this.starting ??= this.startHelpers().catch((error: unknown) => {
      jsonConsoleLogger.error('could not start helper drains; this drain goes on alone', errorFields(error));
      return 0;
    });
  };

  /** How many helpers it started, once their starts are sent. */
  async helpersStarted(): Promise<number> {
    return (await this.starting) ?? 0;
  }

  private async startHelpers(): Promise<number> {
    const { fanout, concurrency, types, deliveryTargets } = this.options;
    const most = fanout - 1;
    // The backlog's count and a start per helper, set aside first so no job's reserve takes them;
    // each is handed back just before it is sent (and counted), so none counts twice.
    if (most < 1 || !this.subrequests.tryReserve(1 + most)) return 0;
    let setAside = 1 + most;
    const sendOne = () => {
      this.subrequests.release(1);
      setAside -= 1;
    };
    try {
      sendOne();
      const ready = await readyBacklog(this.db, { types, deliveryTargets, limit: most * concurrency });
      const helpers = Math.min(most, Math.floor(ready / concurrency));
      for (let index = 1; index <= helpers; index++) {
        sendOne();
        this.subrequests.spend();
        const stub = this.drainers.get(this.drainers.idFromName(drainerName(index)));
        const response = await stub.fetch('https://skiplock-drainer/start', { method: 'POST' });
        if (!response.ok)
          throw new Error(`helper ${drainerName(index)} answered ${response.status}: ${await response.text()}`);
      }
      return helpers;
    } finally {
      this.subrequests.release(setAside);
    }
  }
}
