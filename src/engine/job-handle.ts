import type { Queryable } from '../db/types.js';
import { cancel, type CancelResult } from './cancel.js';
import { EngineError } from './errors.js';
import { getJob } from './read-jobs.js';
import { sleep } from './sleep.js';
import { FINAL_STATUSES, type Job } from './types.js';

/** A job ended without succeeding (failed, cancelled or expired), so it has no result. */
export class JobNotSucceededError extends EngineError {
  override readonly name = 'JobNotSucceededError';
  constructor(readonly job: Job) {
    super(`job ${job.id} ended ${job.status}${job.lastError === null ? '' : `: ${JSON.stringify(job.lastError)}`}`);
  }
}

/** The job did not end within the time the caller would wait. */
export class JobWaitTimeoutError extends EngineError {
  override readonly name = 'JobWaitTimeoutError';
  constructor(
    readonly job: Job,
    timeoutMs: number,
  ) {
    super(`job ${job.id} is still ${job.status} after ${timeoutMs} ms`);
  }
}

/** The job is gone: pruned after its retention period, or never visible to this caller. */
export class JobGoneError extends EngineError {
  override readonly name = 'JobGoneError';
  constructor(readonly jobId: string) {
    super(`job ${jobId} does not exist (pruned, or never enqueued)`);
  }
}

export interface ResultOptions {
  /** Stop waiting after this long (JobWaitTimeoutError). Default: wait until the job ends. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** One enqueued job, typed by what its handler returns. */
export interface JobHandle<Result = unknown> {
  readonly id: string;
  /** The job as the enqueue left it (or the job a dedup key matched). */
  readonly job: Job;
  /** True when a dedup key matched an existing job: this handle follows that job. */
  readonly deduplicated: boolean;
  /** True when the enqueue debounced that job (its payload is the enqueue's, its start moved). */
  readonly debounced: boolean;
  /** True when the enqueue replaced that job's payload (dedupOnConflict `replace`). */
  readonly replaced: boolean;
  /** The job as it is now. */
  status(): Promise<Job>;
  /** Waits for the job to end: its result when it succeeded, else JobNotSucceededError. */
  result(options?: ResultOptions): Promise<Result>;
  /** Cancels it: at once while it waits, at its next heartbeat while it runs. */
  cancel(): Promise<CancelResult>;
}

/** What an enqueue did, for a handle on the job it answered. */
export type EnqueueOutcome = Partial<Pick<JobHandle, 'deduplicated' | 'debounced' | 'replaced'>>;

/** Polls start fast, for short jobs, and back off to this, so a long wait costs little. */
const MAX_POLL_INTERVAL_MS = 1000;
const FIRST_POLL_INTERVAL_MS = 20;

/** A handle on a job by id, for one enqueued earlier (its `id` is all a later process needs). */
export function jobHandle<Result = unknown>(
  db: Queryable,
  job: Job,
  { deduplicated = false, debounced = false, replaced = false }: EnqueueOutcome = {},
): JobHandle<Result> {
  const read = async () => {
    const current = await getJob(db, job.id);
    if (current === undefined) throw new JobGoneError(job.id);
    return current;
  };
  return {
    id: job.id,
    job,
    deduplicated,
    debounced,
    replaced,
    status: read,
    async result(options = {}) {
      const ended = await waitUntilFinal(read, options);
      if (ended.status !== 'succeeded') throw new JobNotSucceededError(ended);
      return ended.result as Result;
    },
    async cancel() {
      const cancelled = await cancel(db, job.id);
      if (cancelled === undefined) throw new JobGoneError(job.id);
      return cancelled;
    },
  };
}

/** Reads until the job is in a final status, the timeout passes or the signal fires. */
async function waitUntilFinal(read: () => Promise<Job>, options: ResultOptions): Promise<Job> {
  const deadline = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
  let interval = FIRST_POLL_INTERVAL_MS;
  for (;;) {
    options.signal?.throwIfAborted();
    const job = await read();
    if (FINAL_STATUSES.includes(job.status)) return job;
    const left = deadline - Date.now();
    if (left <= 0) throw new JobWaitTimeoutError(job, options.timeoutMs!);
    await sleep(Math.min(interval, left), options.signal);
    interval = Math.min(interval * 2, MAX_POLL_INTERVAL_MS);
  }
}
