import { drainOnce, type DrainCounts } from '../drain/drain-once.js';
import { builtInJobs } from '../drain/handlers/built-in.js';
import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import { createRegistry, type JobRegistry } from '../drain/registry.js';
import { httpDatabase } from './database.js';
import { readWorkerDrainSettings, type WorkerDrainSettings } from './drain-settings.js';
import type { Env } from './env.js';

/**
 * The job types this Worker runs: the built-in ones (plus the demo jobs in
 * dev mode). Add your own `defineJob(...)` definitions here.
 */
function workerRegistry(settings: WorkerDrainSettings): JobRegistry {
  return createRegistry(builtInJobs(settings));
}

function invocationId(kind: string): string {
  return `${kind}-${crypto.randomUUID().slice(0, 8)}`;
}

/**
 * The Cron Trigger's drain: housekeeping, then jobs until the queue is empty
 * or the budget ends, over Neon's HTTP driver (one subrequest per statement,
 * nothing to close). Logs one JSON line with the counts.
 */
export async function scheduledDrain(env: Env, cron: string): Promise<DrainCounts> {
  const settings = readWorkerDrainSettings(env);
  const counts = await drainOnce(httpDatabase(env), workerRegistry(settings), {
    budgetSeconds: settings.budgetSeconds,
    concurrency: settings.concurrency,
    retentionSeconds: settings.retentionSeconds,
    workerId: invocationId('cron'),
  });
  console.log(JSON.stringify({ event: 'drain', cron, ...counts }));
  return counts;
}

/**
 * Call after an enqueue: drains at once inside the request's `waitUntil`, so
 * an idle system starts the new job within milliseconds instead of at the
 * next cron tick. Jobs only, no housekeeping (the cron drain does that), with
 * a budget that fits in `waitUntil`. FAST_PATH=off turns it off. Never
 * throws: the cron drain is the safety net.
 */
export function fastPathDrain(env: Env, ctx: Pick<ExecutionContext, 'waitUntil'>): void {
  let settings: WorkerDrainSettings;
  try {
    settings = readWorkerDrainSettings(env);
  } catch (error) {
    jsonConsoleLogger.error('fast-path drain not started: bad settings', errorFields(error));
    return;
  }
  if (!settings.fastPath) return;
  ctx.waitUntil(
    drainOnce(httpDatabase(env), workerRegistry(settings), {
      budgetSeconds: settings.fastPathBudgetSeconds,
      concurrency: settings.concurrency,
      housekeeping: false,
      workerId: invocationId('fast'),
    }).then(
      (counts) => console.log(JSON.stringify({ event: 'fast-path-drain', ...counts })),
      (error: unknown) => jsonConsoleLogger.error('fast-path drain failed', errorFields(error)),
    ),
  );
}
