import { drainOnce, type DrainCounts } from '../drain/drain-once.js';
import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { JobRegistry } from '../drain/registry.js';
import type { WaitUntil } from '../http/context.js';
import { drainDatabase } from './database.js';
import type { ResolvedSettings } from './settings.js';

/** What a drain of one Worker environment runs with. */
export interface DrainRuntime {
  settings: ResolvedSettings;
  registry: JobRegistry;
}

function invocationId(kind: string): string {
  return `${kind}-${crypto.randomUUID().slice(0, 8)}`;
}

/**
 * The Cron Trigger's drain: housekeeping (periodic jobs included), then jobs
 * until the queue is empty or the budget ends. Logs one JSON line with the counts.
 */
export async function scheduledDrain({ settings, registry }: DrainRuntime, cron: string): Promise<DrainCounts> {
  const db = drainDatabase(settings.database, settings.drain.concurrency + 1);
  try {
    const counts = await drainOnce(db, registry, {
      budgetSeconds: settings.drain.budgetSeconds,
      concurrency: settings.drain.concurrency,
      retentionSeconds: settings.jobs.retentionSeconds,
      workerId: invocationId('cron'),
    });
    console.log(JSON.stringify({ event: 'drain', cron, ...counts }));
    return counts;
  } finally {
    await db.close();
  }
}

/**
 * Call after an enqueue: drains at once inside the request's `waitUntil`, so
 * an idle system starts the new job within milliseconds instead of at the
 * next cron tick. Jobs only, no housekeeping (the cron drain does that), with
 * a budget that fits in `waitUntil`. Never throws: the cron drain is the safety net.
 */
export function fastPathDrain({ settings, registry }: DrainRuntime, ctx: WaitUntil): void {
  if (!settings.drain.fastPath || registry.types.length === 0) return;
  const db = drainDatabase(settings.database, settings.drain.concurrency + 1);
  ctx.waitUntil(
    drainOnce(db, registry, {
      budgetSeconds: settings.drain.fastPathBudgetSeconds,
      concurrency: settings.drain.concurrency,
      housekeeping: false,
      workerId: invocationId('fast'),
    })
      .then(
        (counts) => console.log(JSON.stringify({ event: 'fast-path-drain', ...counts })),
        (error: unknown) => jsonConsoleLogger.error('fast-path drain failed', errorFields(error)),
      )
      .finally(() => db.close()),
  );
}
