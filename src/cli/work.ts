import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { builtInJobs, type JobDefinition, type PeriodicJob } from '../drain/index.js';
import { jsonConsoleLogger as logger } from '../drain/internal.js';
import { readWorkerConfig, startWorker } from '../node-worker/index.js';
import { readOptions } from './read-options.js';

const USAGE = 'usage: skiplock work [./jobs.js ...] (settings from DATABASE_URL, WORKER_CONCURRENCY, ...)';

/**
 * `skiplock work ./jobs.js`: a Node worker running the job types that the
 * modules export (every exported `defineJob(...)` and `definePeriodicJob(...)`,
 * also inside exported arrays), beside the built-in `http` job and, with
 * SKIPLOCK_DEV=1, the demo jobs. Runs until SIGTERM or SIGINT, then stops
 * gracefully and exits 0.
 */
export async function workCommand(args: string[]): Promise<void> {
  const { positionals } = readOptions(args, {}, USAGE, true);
  const config = readWorkerConfig(process.env);
  const own = { jobs: [] as JobDefinition[], schedules: [] as PeriodicJob[] };
  for (const path of positionals) {
    const found = collectDefinitions(await importJobModule(path));
    if (found.jobs.length === 0 && found.schedules.length === 0) {
      throw new Error(`${path} exports no job definitions: export defineJob(...) results (from skiplock/drain)`);
    }
    own.jobs.push(...found.jobs);
    own.schedules.push(...found.schedules);
  }
  const handlers = [...builtInJobs(config.jobs), ...own.jobs];
  const worker = await startWorker({ ...config.worker, handlers, schedules: own.schedules, logger });
  logger.info('worker started', {
    workerId: worker.workerId,
    types: handlers.map((handler) => handler.type),
    schedules: own.schedules.map((schedule) => schedule.name),
    concurrency: config.worker.concurrency,
  });
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    // npm relays the terminal's signal too, so one Ctrl-C can arrive twice: stop once.
    if (stopping) return;
    stopping = true;
    logger.info('stopping: no new claims; running jobs may finish', { signal, graceMs: config.worker.shutdownGraceMs });
    void worker.stop();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await worker.done;
  logger.info('worker stopped', { workerId: worker.workerId });
}

async function importJobModule(path: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(resolve(path)).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n', 1)[0] : String(error);
    throw new Error(`cannot load ${path}: ${reason}`, { cause: error });
  }
}

/** Job definitions and periodic jobs among a module's exports (also inside arrays and a default export). */
function collectDefinitions(module: Record<string, unknown>): { jobs: JobDefinition[]; schedules: PeriodicJob[] } {
  const jobs = new Set<JobDefinition>();
  const schedules = new Set<PeriodicJob>();
  const visit = (value: unknown, depth: number): void => {
    if (isJobDefinition(value)) jobs.add(value);
    else if (isPeriodicJob(value)) schedules.add(value);
    else if (depth < 2 && Array.isArray(value)) for (const item of value) visit(item, depth + 1);
    else if (depth < 1 && typeof value === 'object' && value !== null)
      for (const item of Object.values(value)) visit(item, depth + 1);
  };
  for (const value of Object.values(module)) visit(value, 0);
  return { jobs: [...jobs], schedules: [...schedules] };
}

function isJobDefinition(value: unknown): value is JobDefinition {
  const candidate = value as Partial<JobDefinition> | null;
  return (
    typeof candidate?.type === 'string' &&
    typeof candidate.run === 'function' &&
    typeof candidate.checkPayload === 'function'
  );
}

function isPeriodicJob(value: unknown): value is PeriodicJob {
  const candidate = value as Partial<PeriodicJob> | null;
  return (
    typeof candidate?.name === 'string' && typeof candidate.cron === 'string' && typeof candidate.type === 'string'
  );
}
