import { builtInJobs } from '../drain/handlers/built-in.js';
import { createRegistry } from '../drain/registry.js';
import { workerDeliveries } from './deliveries.js';
import type { DrainRuntime } from './drain.js';
import type { SkiplockEnv } from './env.js';
import { resolveSettings } from './settings.js';
import type { SkiplockOptions } from './create-skiplock.js';

/*
 * What a Worker loads with its first request, cron tick or helper drain
 * rather than as it starts: the settings (and zod, which reads them), the
 * job types and the drains.
 */
export { destinationProblem, parseAllowedHosts } from '../drain/handlers/http-destination.js';
export { fastPathDrain, helperDrain, scheduledDrain } from './drain.js';

/**
 * One environment's settings, job types and deliveries; throws
 * ConfigurationError naming what to fix. `knownTypes`: the types a schedule
 * may name that no definition passed has (the demo types).
 */
export function workerRuntime(
  options: SkiplockOptions,
  env: SkiplockEnv,
  api: boolean,
  knownTypes: readonly string[],
): DrainRuntime {
  const settings = resolveSettings(options, env, { api });
  const builtIn = builtInJobs(settings.jobs).filter((job) => options.httpJob !== false || job.type !== 'http');
  const registry = createRegistry([...builtIn, ...(options.jobs ?? [])], options.schedules, {
    knownTypes,
  });
  return {
    settings,
    registry,
    deliveries: workerDeliveries(env, settings.jobs.http),
    drainers: env.SKIPLOCK_DRAINER,
    tracing: options.tracing,
  };
}
