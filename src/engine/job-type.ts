import type { JobKeys } from './enqueue.js';
import { InvalidInputError } from './errors.js';
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
  /** Tags every job of this type carries, before the enqueue's own. */
  readonly tags?: readonly string[];
  /** The concurrency or ordering key a payload's job takes (the enqueue's own options win). */
  keysOf?(payload: unknown): JobKeys;
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
function typeAttempts(job: JobType, maxAttempts: number | undefined): { maxAttempts?: number } {
  if (job.maxAttempts === undefined) return maxAttempts === undefined ? {} : { maxAttempts };
  return { maxAttempts: maxAttempts === undefined ? job.maxAttempts : Math.min(maxAttempts, job.maxAttempts) };
}

/**
 * An enqueue input of this type as it is stored: the keys its definition
 * makes from the payload (the input's own win), its attempts within the
 * type's cap, and the type's tags before the input's (enqueue keeps each
 * once). A key function that throws refuses the job, naming the type.
 */
export function typeInput<Input extends JobKeys & { maxAttempts?: number; tags?: readonly string[] }>(
  job: JobType,
  payload: unknown,
  input: Input,
): Input {
  let keys: JobKeys | undefined;
  try {
    keys = job.keysOf?.(payload);
  } catch (error) {
    throw new InvalidInputError(
      `${job.type}: its key function failed on this payload: ${error instanceof Error ? error.message : String(error)}`,
      'payload',
    );
  }
  const tags = job.tags === undefined ? {} : { tags: [...job.tags, ...(input.tags ?? [])] };
  return { ...keys, ...input, ...typeAttempts(job, input.maxAttempts), ...tags };
}
