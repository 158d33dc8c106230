import type { Db } from '../../../src/db/types';
import { drainOnce, type DrainCounts, type DrainOptions } from '../../../src/drain/drain-once';
import type { JobDefinition } from '../../../src/drain/define-job';
import type { Logger } from '../../../src/drain/logger';
import type { PeriodicJob } from '../../../src/drain/periodic';
import { createRegistry } from '../../../src/drain/registry';
import { getJob, getJobEvents, type Job, type JobEventKind, type JobStatus } from '../../../src/engine';
import { waitFor } from '../../support/wait-for';

/** Keeps what the drain logs, for assertions, instead of printing it. */
export function recordingLogger(): Logger & { lines: Array<{ level: string; message: string }> } {
  const lines: Array<{ level: string; message: string }> = [];
  const record = (level: string) => (message: string) => void lines.push({ level, message });
  return { lines, info: record('info'), warn: record('warn'), error: record('error') };
}

/** One drain over these job types, quiet, with a budget that leaves room on a loaded machine, 5 jobs at once unless told. */
export function drain(
  db: Db,
  jobs: readonly JobDefinition[],
  options: Partial<DrainOptions> & { schedules?: readonly PeriodicJob[] } = {},
): Promise<DrainCounts> {
  const { schedules, ...drainOptions } = options;
  return drainOnce(db, createRegistry(jobs, schedules), {
    budgetSeconds: 45,
    concurrency: 5,
    logger: recordingLogger(),
    ...drainOptions,
  });
}

export async function jobById(db: Db, id: string): Promise<Job> {
  const job = await getJob(db, id);
  if (job === undefined) throw new Error(`job ${id} does not exist`);
  return job;
}

export async function eventKinds(db: Db, id: string): Promise<JobEventKind[]> {
  return (await getJobEvents(db, id)).map((event) => event.kind);
}

/** A promise with its resolve function outside: a gate a test opens when it is ready. */
export function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Polls until the job shows `status`. */
export async function untilStatus(db: Db, id: string, status: JobStatus): Promise<void> {
  let seen: JobStatus | undefined;
  await waitFor(
    () => `job ${id} to be ${status} (it is ${seen})`,
    async () => (seen = (await jobById(db, id)).status) === status,
    { everyMs: 10 },
  );
}
