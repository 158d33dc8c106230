import type { Json } from './types.js';

/** One way a payload fails its job type's schema: the field's dotted path inside the payload, and why. */
export interface PayloadIssue {
  path: string;
  message: string;
}

/**
 * A job type as enqueue sees it: its name and the check a payload must pass
 * before it is stored. `defineJob` (skiplock/drain) makes one from a zod
 * schema and a handler; its type parameters carry the payload and result
 * types to enqueue, to job handles and to the HTTP client, so a wrong
 * payload fails to compile and a result comes back typed.
 */
export interface JobType<Type extends string = string, Payload = unknown, Result = unknown> {
  readonly type: Type;
  /** The problems of a payload (none when it fits), checked before it is stored. */
  checkPayload(payload: unknown): Promise<readonly PayloadIssue[]>;
  /**
   * What a job's status view (its statusUrl: browsers, without an API key)
   * shows of its result. Without it, none: the result stays with API keys.
   */
  publicResult?(result: Json): Json;
  /** What the status view shows of the job's saved progress, in place of the default `{ percent, message }`. */
  publicProgress?(progress: Json): Json;
  /** The most attempts a job of this type gets: what enqueue stores when given none or more. */
  readonly maxAttempts?: number;
  /** Types only, never set at run time: what enqueue takes and what the handler returns. */
  readonly '~types'?: { readonly payload: Payload; readonly result: Result };
}

/** The payload enqueue takes for a job type (the schema's input). */
export type PayloadOf<J extends JobType> = NonNullable<J['~types']>['payload'];

/** What a job of this type returns when it succeeds (the handler's resolved return value). */
export type ResultOf<J extends JobType> = NonNullable<J['~types']>['result'];

/**
 * The attempts a job of this type is stored with, to spread into its
 * enqueue input: its own, within its type's cap (the cap when it gives none).
 */
export function typeAttempts(job: JobType, maxAttempts: number | undefined): { maxAttempts?: number } {
  if (job.maxAttempts === undefined) return maxAttempts === undefined ? {} : { maxAttempts };
  return { maxAttempts: maxAttempts === undefined ? job.maxAttempts : Math.min(maxAttempts, job.maxAttempts) };
}
