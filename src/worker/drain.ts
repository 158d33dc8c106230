import type { QueueDeliveries } from '../drain/bulk-delivery/queue-deliveries.js';
import { drainOnce, type DrainCounts } from '../drain/drain-once.js';
import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { JobRegistry } from '../drain/registry.js';
import { SubrequestBudget } from '../drain/subrequest-budget.js';
import { WorkArrivals } from '../drain/work-arrivals.js';
import { drainWorkerId } from '../engine/worker-id.js';
import type { Tracing } from '../engine/tracing.js';
import type { WaitUntil } from '../http/context.js';
import type { Queryable } from '../db/types.js';
import { nextDueAt } from '../engine/next-due.js';
import { drainDatabase } from './database.js';
import { afterAnswer } from './after-answer.js';
import { FanOut, type DrainerNamespace } from './fan-out.js';
import type { QueueClock } from './queue-clock.js';
import type { ResolvedSettings } from './settings.js';

/** What a drain of one Worker environment runs with. */
export interface DrainRuntime {
  settings: ResolvedSettings;
  registry: JobRegistry;
  /** The queues' delivery targets this Worker reaches: webhooks, and its Queues producer bindings. */
  deliveries: QueueDeliveries;
  /** This isolate's fast-path drain while it still claims: later enqueues are announced to it. */
  fastPath?: WorkArrivals | undefined;
  /** SKIPLOCK_DRAINER, when bound: the helpers a drain with a backlog starts (DRAIN_FANOUT). */
  drainers?: DrainerNamespace | undefined;
  /** The Worker's `tracing` option: each attempt runs in a span of its job's trace. */
  tracing?: Tracing | undefined;
}

/** An enqueue request's own statements before its fast path: its API key's lookup, the enqueue, one to spare. */
const ENQUEUE_REQUEST_SUBREQUESTS = 3;

/** What a cron tick did: nothing, when the queue clock said nothing is due; else the drain's counts. */
export type ScheduledOutcome =
  | ({ drained: true } & DrainCounts & Subrequests & Helpers)
  | ({ drained: false } & Subrequests);

/** Helper drains a drain started (fan-out). */
export interface Helpers {
  helpers: number;
}

/** The fan-out of a drain that may start helpers: with SKIPLOCK_DRAINER bound and DRAIN_FANOUT above 1. */
function fanOutOf(
  { settings, registry, deliveries, drainers }: DrainRuntime,
  db: Queryable,
  subrequests: SubrequestBudget,
): FanOut | undefined {
  if (drainers === undefined || settings.drain.fanout <= 1) return undefined;
  return new FanOut(drainers, db, subrequests, {
    fanout: settings.drain.fanout,
    concurrency: settings.drain.concurrency,
    types: registry.types,
    deliveryTargets: deliveries.targets,
  });
}

/** The queue clock's calls a drain makes after `begin`: the next-due statement and the settle. */
const CLOCK_SETTLE_SUBREQUESTS = 2;

/**
 * The Cron Trigger's drain: housekeeping (periodic jobs included), then jobs
 * until the queue is empty or the budget ends. Logs one JSON line with the
 * counts. With the queue clock, a tick with nothing due ends before any
 * statement, and a drain ends by telling the clock when work is next due.
 */
export async function scheduledDrain(
  runtime: DrainRuntime,
  cron: string,
  clock?: QueueClock,
): Promise<ScheduledOutcome> {
  const { settings, registry } = runtime;
  const subrequests = new SubrequestBudget(settings.drain.subrequestLimit);
  let epoch: number | undefined;
  if (clock !== undefined) {
    try {
      const tick = await clock.begin(
        {
          now: Date.now(),
          definitions: await definitionsOf(registry, settings),
          recheckMs: settings.drain.idleRecheckSeconds * 1000,
          holdMs: settings.drain.budgetSeconds * 1000,
        },
        subrequests,
      );
      if (!tick.drain) return { drained: false, subrequests: subrequests.sent };
      epoch = tick.epoch;
      subrequests.tryReserve(CLOCK_SETTLE_SUBREQUESTS);
    } catch (error) {
      // A clock that cannot answer must not stop the queue: drain as if none were bound.
      jsonConsoleLogger.error('the queue clock did not answer; draining without it', errorFields(error));
    }
  }
  const { db, connections } = drainDatabase(settings.database, subrequests);
  const fanOut = fanOutOf(runtime, db, subrequests);
  try {
    const counts = await drainOnce(db, registry, {
      budgetSeconds: settings.drain.budgetSeconds,
      concurrency: settings.drain.concurrency,
      claimBatchSize: settings.drain.claimBatchSize,
      retentionSeconds: settings.jobs.retentionSeconds,
      statsRetentionDays: settings.jobs.statsRetentionDays,
      workerId: drainWorkerId('cron'),
      subrequests,
      connections,
      onBacklog: fanOut?.onBacklog,
      deliveries: runtime.deliveries,
      tracing: runtime.tracing,
    });
    const helpers = (await fanOut?.helpersStarted()) ?? 0;
    if (clock !== undefined && epoch !== undefined) {
      subrequests.release(CLOCK_SETTLE_SUBREQUESTS);
      await settleClock(clock, epoch, db, runtime, subrequests);
    }
    const outcome = { drained: true as const, ...counts, helpers, subrequests: subrequests.sent };
    console.log(JSON.stringify({ event: 'drain', cron, ...outcome }));
    return outcome;
  } finally {
    await db.close();
  }
}

/** Tells the clock when work is next due; should that fail, the clock's hold makes the next tick drain. */
async function settleClock(
  clock: QueueClock,
  epoch: number,
  db: Queryable,
  { settings, registry, deliveries }: DrainRuntime,
  subrequests: SubrequestBudget,
): Promise<void> {
  try {
    const dueAt = await nextDueAt(db, {
      types: registry.types,
      deliveryTargets: deliveries.targets,
      retentionSeconds: settings.jobs.retentionSeconds,
    });
    await clock.settle(dueAt.getTime(), epoch, subrequests);
  } catch (error) {
    jsonConsoleLogger.error(
      'could not tell the queue clock when work is next due; the next tick drains',
      errorFields(error),
    );
  }
}

/**
 * What the drains run with, as one digest: a deploy that changes the job
 * types, the schedules, the retention or the database drains at the next
 * tick, whatever the clock said (a new schedule must be written before it
 * can come due; another database has its own queue).
 */
async function definitionsOf(registry: JobRegistry, settings: ResolvedSettings): Promise<string> {
  const text = JSON.stringify({
    types: registry.types,
    schedules: registry.schedules,
    retention: settings.jobs.retentionSeconds,
    database: settings.database,
  });
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** Subrequests a drain made (every Neon HTTP statement is one). */
export interface Subrequests {
  subrequests: number;
}

/**
 * Call after an enqueue: drains at once inside the request's `waitUntil`, so
 * an idle system starts the new job within milliseconds instead of at the
 * next cron tick. Jobs only, no housekeeping (the cron drain does that), with
 * a budget that fits in `waitUntil`. One per isolate at a time: while this
 * isolate's fast-path drain still claims, an enqueue only tells it to claim
 * again, so a burst of enqueues starts one drain, not one each. The drain
 * starts once the request has answered (`afterAnswer`). Never throws:
 * the cron drain is the safety net.
 */
export function fastPathDrain(runtime: DrainRuntime, ctx: WaitUntil): void {
  const { settings, registry, deliveries } = runtime;
  if (!settings.drain.fastPath) return;
  if (runtime.fastPath?.announce()) return;
  const arrivals = new WorkArrivals();
  runtime.fastPath = arrivals;
  // The drain spends the subrequests of the request whose waitUntil holds it, which made its own first.
  const subrequests = new SubrequestBudget(settings.drain.subrequestLimit);
  subrequests.countUnseen(ENQUEUE_REQUEST_SUBREQUESTS);
  const { db, connections } = drainDatabase(settings.database, subrequests);
  const fanOut = fanOutOf(runtime, db, subrequests);
  afterAnswer(ctx, () =>
    drainOnce(db, registry, {
      budgetSeconds: settings.drain.fastPathBudgetSeconds,
      concurrency: settings.drain.concurrency,
      claimBatchSize: settings.drain.claimBatchSize,
      housekeeping: false,
      workerId: drainWorkerId('fast'),
      arrivals,
      subrequests,
      connections,
      onBacklog: fanOut?.onBacklog,
      deliveries,
      tracing: runtime.tracing,
    })
      .then(
        async (counts) => {
          const helpers = (await fanOut?.helpersStarted()) ?? 0;
          if (settings.drain.logBackgroundDrains) {
            console.log(
              JSON.stringify({ event: 'fast-path-drain', ...counts, helpers, subrequests: subrequests.sent }),
            );
          }
        },
        (error: unknown) => jsonConsoleLogger.error('fast-path drain failed', errorFields(error)),
      )
      .finally(() => {
        arrivals.close();
        if (runtime.fastPath === arrivals) runtime.fastPath = undefined;
        return db.close();
      }),
  );
}

/**
 * A helper drain (fan-out), run by a `skiplock.Drainer` alarm: jobs only,
 * with a cron drain's budget and subrequests and connections of its own.
 * Never throws: a failure is a log line, and the cron drain goes on.
 */
export async function helperDrain(
  { settings, registry, deliveries, tracing }: DrainRuntime,
  name: string,
): Promise<DrainCounts | undefined> {
  const subrequests = new SubrequestBudget(settings.drain.subrequestLimit);
  const { db, connections } = drainDatabase(settings.database, subrequests);
  try {
    const counts = await drainOnce(db, registry, {
      budgetSeconds: settings.drain.budgetSeconds,
      concurrency: settings.drain.concurrency,
      claimBatchSize: settings.drain.claimBatchSize,
      housekeeping: false,
      workerId: drainWorkerId(name),
      subrequests,
      connections,
      deliveries,
      tracing,
    });
    if (settings.drain.logBackgroundDrains)
      console.log(JSON.stringify({ event: 'helper-drain', name, ...counts, subrequests: subrequests.sent }));
    return counts;
  } catch (error) {
    jsonConsoleLogger.error('helper drain failed', { name, ...errorFields(error) });
    return undefined;
  } finally {
    await db.close();
  }
}
