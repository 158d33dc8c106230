import type { JobDefinition } from './define-job.js';
import type { PeriodicJob } from './periodic.js';

/**
 * The job types one drain or worker can run, and the periodic jobs it keeps
 * enqueueing. A drain claims only these types; jobs of other types wait for
 * the pull workers or Node workers that name them.
 */
export interface JobRegistry {
  readonly types: readonly string[];
  readonly schedules: readonly PeriodicJob[];
  definitionOf(type: string): JobDefinition | undefined;
}

export interface RegistryOptions {
  /** Types that schedules may name beside the registry's own (ones another worker runs). */
  knownTypes?: readonly string[];
}

/**
 * Refuses, naming the definition, two job types of one name, two schedules
 * of one name and a schedule whose type nobody defines: mistakes that
 * would otherwise show only as jobs that never run.
 */
export function createRegistry(
  jobs: readonly JobDefinition[],
  schedules: readonly PeriodicJob[] = [],
  options: RegistryOptions = {},
): JobRegistry {
  const byType = new Map<string, JobDefinition>();
  for (const job of jobs) {
    if (byType.has(job.type)) throw new Error(`job type "${job.type}" is defined twice`);
    byType.set(job.type, job);
  }
  const names = new Set<string>();
  for (const schedule of schedules) {
    if (names.has(schedule.name)) throw new Error(`periodic job "${schedule.name}" is defined twice`);
    names.add(schedule.name);
    if (!byType.has(schedule.type) && !options.knownTypes?.includes(schedule.type)) {
      throw new Error(`periodic job "${schedule.name}" names job type "${schedule.type}", which no job definition has`);
    }
  }
  return {
    types: [...byType.keys()],
    schedules,
    definitionOf: (type) => byType.get(type),
  };
}
