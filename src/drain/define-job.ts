import type { z } from 'zod';
import type { ClaimedJob, Json } from '../engine/types.js';
import { InvalidPayload } from './job-errors.js';
import type { Logger } from './logger.js';

/** Retry delays: full jitter over min(maxSeconds, baseSeconds * 2^(attempt-1)). */
export interface Backoff {
  baseSeconds: number;
  maxSeconds: number;
}

export interface JobOptions {
  /** Lease (whole seconds) each heartbeat sets for jobs of this type; the job's own leaseSeconds when left out. */
  leaseSeconds?: number;
  /** Caps the job's own maxAttempts: the attempt that reaches it fails for good. */
  maxAttempts?: number;
  /** Retry delays for this type; the job's own backoff when left out. */
  backoff?: Backoff;
  /** Wall time one attempt may take; past it the signal fires and the attempt fails (and may retry). */
  timeoutSeconds?: number;
}

/** What a handler gets beside its payload. */
export interface JobContext {
  /** The job as claimed; `job.progress` holds what an earlier attempt saved. */
  readonly job: ClaimedJob;
  /** 1 on the first attempt. */
  readonly attempt: number;
  /**
   * Fires when the attempt must stop: the drain's deadline, the timeout, a
   * cancel, or a lost lease; `signal.reason` says which. Pass it to fetch and
   * check it in loops: the drain stops waiting for the handler when it fires.
   */
  readonly signal: AbortSignal;
  /** Heartbeat now; `leaseSeconds` also becomes the length of later heartbeats. */
  extendLease(leaseSeconds?: number): Promise<void>;
  /** Saves progress with a heartbeat, so a later attempt can continue from it. */
  progress(value: Json): Promise<void>;
  readonly log: Logger;
}

/** Returns the job's result (JSON, capped in size); throws to fail the attempt. */
export type JobHandler<Payload> = (payload: Payload, context: JobContext) => unknown;

/** A job type the drain can run, its payload schema erased behind `run`. */
export interface JobDefinition {
  readonly type: string;
  readonly options: Readonly<JobOptions>;
  /** Checks the payload against the schema (InvalidPayload when it does not fit), then runs the handler. */
  run(payload: Json, context: JobContext): Promise<unknown>;
}

/**
 * Defines a job type: its name, the zod schema of its payload, the handler
 * that receives the parsed, typed payload, and options.
 */
export function defineJob<Schema extends z.ZodType>(
  type: string,
  schema: Schema,
  handler: JobHandler<z.output<Schema>>,
  options: JobOptions = {},
): JobDefinition {
  checkOptions(type, options);
  return {
    type,
    options: { ...options },
    async run(payload, context) {
      const parsed = await schema.safeParseAsync(payload);
      if (!parsed.success) {
        throw new InvalidPayload(
          type,
          parsed.error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message })),
        );
      }
      return handler(parsed.data, context);
    },
  };
}

function checkOptions(type: string, options: JobOptions): void {
  const positive = (value: number | undefined) => value === undefined || (Number.isFinite(value) && value > 0);
  const problems = [
    options.leaseSeconds !== undefined && !(Number.isInteger(options.leaseSeconds) && options.leaseSeconds >= 1) &&
      'leaseSeconds must be a whole number from 1',
    options.maxAttempts !== undefined && !(Number.isInteger(options.maxAttempts) && options.maxAttempts >= 1) &&
      'maxAttempts must be an integer from 1',
    !positive(options.timeoutSeconds) && 'timeoutSeconds must be above 0',
    options.backoff !== undefined &&
      !(positive(options.backoff.baseSeconds) && options.backoff.maxSeconds >= options.backoff.baseSeconds) &&
      'backoff needs baseSeconds above 0 and maxSeconds >= baseSeconds',
  ].filter((problem) => problem !== false);
  if (problems.length > 0) throw new RangeError(`job type "${type}": ${problems.join('; ')}`);
}
