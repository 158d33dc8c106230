import { z } from 'zod';
import {
  type DedupOnConflict,
  type DedupScope,
  type JobKeys,
  MAX_RATE_LIMIT,
  MAX_RATE_PERIOD_SECONDS,
  type OrderingOnFailure,
  type RateOnExcess,
} from '../engine/enqueue.js';
import type { JobType, PayloadIssue } from '../engine/job-type.js';
import { isRetention, type Retention } from '../engine/retention.js';
import type { ClaimedJob, Json } from '../engine/types.js';
import { InvalidPayloadError } from './job-errors.js';
import type { Logger } from './logger.js';
import type { Steps } from './steps.js';
import type { DependencyEnd } from '../engine/flows.js';
import { MAX_TAGS, TAG_PATTERN, TAG_SYNTAX } from '../engine/tags.js';
import type { TraceContext } from '../engine/trace-context.js';

/** Retry delays: full jitter over min(maxSeconds, baseSeconds * 2^(attempt-1)). */
export interface Backoff {
  baseSeconds: number;
  maxSeconds: number;
}

export interface JobOptions<Result = unknown, Payload = unknown> {
  /** Lease (whole seconds) each heartbeat sets for jobs of this type; the job's own leaseSeconds when left out. */
  leaseSeconds?: number;
  /** Caps the job's own maxAttempts: the attempt that reaches it fails for good. */
  maxAttempts?: number;
  /**
   * How long finished jobs of this type are kept, in seconds (60 or more), or `'none'`: a succeeded
   * job keeps no history (a failed, cancelled or expired one is kept as its queue's, or the default,
   * retention says). Wins over the queue's retention and RETENTION_SECONDS; the drains that run the
   * type write it to `skiplock.job_types`, where every drain's pruning reads it.
   */
  retentionSeconds?: Retention;
  /** Tags every job of this type carries, before its enqueue's own (see `EnqueueInput.tags`). */
  tags?: readonly string[];
  /** Retry delays for this type; the job's own backoff when left out. */
  backoff?: Backoff;
  /** Wall time one attempt may take; past it the signal fires and the attempt fails (and may retry). */
  timeoutSeconds?: number;
  /**
   * The most subrequests one attempt makes beyond skiplock's own statements:
   * its fetches (`ctx.fetch` or any other), its calls to other bindings, its
   * `progress()` and `extendLease()` calls. Default 0. Where an invocation
   * caps subrequests (Workers: SUBREQUEST_LIMIT), a drain starts the job only
   * while these fit.
   */
  subrequests?: number;
  /**
   * What a job's status URL (a browser, holding no API key) may show of its
   * result, e.g. `(result) => ({ downloadUrl: result.url })`. Without it the
   * status view shows no result: results often hold what only the product's
   * backend should see.
   */
  publicResult?(result: Result): Json;
  /**
   * What the status view shows of the saved progress. Without it: a number
   * 0 to 100 saved as `progress(40)`, or the `percent` and `message` of an
   * object, and nothing else (a cursor to resume from stays private).
   */
  publicProgress?(progress: Json): Json;
  /**
   * A concurrency key from each job's payload, e.g.
   * `{ key: (p) => `account:${p.accountId}`, limit: 2 }`: at most `limit`
   * (default 1) of a tenant's jobs with one key are past their turn at once
   * (waiting to start, running, retrying or parked); the others wait, held,
   * and take the slots that free in enqueue order. Exclusive with ordering.
   */
  concurrency?: { key(payload: Payload): string; limit?: number };
  /**
   * An ordering key from each job's payload: a tenant's jobs with one key
   * run one at a time in enqueue order, a retrying one keeping the others
   * waiting. `onFailure` says what they do when it fails for good: `hold`
   * (the default: until it is retried or the key unblocked) or `continue`.
   */
  ordering?: { key(payload: Payload): string; onFailure?: OrderingOnFailure };
  /**
   * A rate limit per key, e.g. `{ key: (p) => `store:${p.storeId}`, limit: 10,
   * periodSeconds: 1 }`: at most `limit` of a tenant's jobs with one key
   * start in any `periodSeconds`, every attempt counted. Without `key`, the
   * job type is the key. `onExcess`: `throttle` (the default) holds the
   * excess until the window has room; `drop` ends it cancelled at enqueue.
   * Exclusive with concurrency and ordering.
   */
  rateLimit?: { key?(payload: Payload): string; limit: number; periodSeconds: number; onExcess?: RateOnExcess };
  /**
   * Debounce, e.g. `{ key: (p) => `account:${p.accountId}`, periodSeconds: 30, maxDelaySeconds: 300 }`:
   * while a job of the key (per tenant and queue) has not started, an enqueue
   * with the key replaces its payload and moves its start to `periodSeconds`
   * from now, never past its first enqueue plus `maxDelaySeconds`; one job
   * runs per burst. Exclusive with ordering and dedup.
   */
  debounce?: { key(payload: Payload): string; periodSeconds: number; maxDelaySeconds?: number };
  /**
   * A dedup key from each job's payload and what an enqueue does when a job
   * holds it: `onConflict` `return` (the default), `replace` or `refuse`;
   * `scope` `waitingOrRunning` (the default) or `waiting`; `windowSeconds`
   * after the job ends. See docs/keys.md.
   */
  dedup?: {
    key(payload: Payload): string;
    onConflict?: DedupOnConflict;
    scope?: DedupScope;
    windowSeconds?: number;
  };
}

/** What a handler gets beside its payload. */
export interface JobContext {
  /** The job as claimed; `job.progress` holds what an earlier attempt saved. */
  readonly job: ClaimedJob;
  /** 1 on the first attempt. */
  readonly attempt: number;
  /**
   * The W3C `traceparent` this attempt runs in, to pass on (a `traceparent`
   * header of a request the handler sends): its span's, when the drain
   * traces (`tracing`); else undefined.
   */
  readonly traceparent: string | undefined;
  /**
   * The same with its `tracestate`, to spread into the options of a job
   * enqueued from the handler (`enqueue(db, job, payload, { ...ctx.traceContext })`),
   * so that job's attempts join this trace; undefined when the drain does not trace.
   */
  readonly traceContext: TraceContext | undefined;
  /**
   * Fires when the attempt must stop: the drain's deadline, the timeout, a
   * cancel, or a lost lease; `signal.reason` says which. Pass it to fetch and
   * check it in loops: the drain stops waiting for the handler when it fires.
   */
  readonly signal: AbortSignal;
  /** Heartbeat now; `leaseSeconds` also becomes the length of later heartbeats. */
  extendLease(leaseSeconds?: number): Promise<void>;
  /**
   * `fetch`, through the drain: where connections and subrequests are
   * counted (Workers), it waits for a connection and counts a subrequest, so
   * many jobs can wait on I/O at once without crowding out the drain's own
   * statements. The attempt's signal aborts it unless `init` brings one.
   * Holds its connection until the response body is read or cancelled, or
   * the attempt ends.
   */
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** Saves progress with a heartbeat, so a later attempt can continue from it. */
  progress(value: Json): Promise<void>;
  readonly log: Logger;
  /**
   * Durable steps: `do` (run once, result recorded), `sleep` and
   * `sleepUntil`, `waitForEvent`, `invoke` (a child job). See docs/steps.md.
   */
  readonly step: Steps;
  /** How the jobs this one depends on (in a flow) ended. */
  dependencies(): Promise<DependencyEnd[]>;
}

/** Returns the job's result (JSON, capped in size); throws to fail the attempt. */
export type JobHandler<Payload, Result = unknown> = (payload: Payload, context: JobContext) => Result | Promise<Result>;

/**
 * A job type the drain can run: its name, options and `run`, which checks the
 * payload and calls the handler. As a `JobType` it also types enqueue: the
 * payload is the schema's input, the result the handler's return value.
 */
export interface JobDefinition<Type extends string = string, Payload = unknown, Result = unknown>
  extends JobType<Type, Payload, Result> {
  readonly options: Readonly<JobOptions>;
  /** Checks the payload against the schema (InvalidPayloadError when it does not fit), then runs the handler. */
  run(payload: Json, context: JobContext): Promise<unknown>;
}

/**
 * Defines a job type: its name, the zod schema of its payload, the handler
 * that receives the parsed, typed payload, and options. Export it from your
 * own code; the Worker factory, `startWorker` and `skiplock work` run it, and
 * `enqueue(db, job, payload)` is checked against it.
 */
export function defineJob<const Type extends string, Schema extends z.ZodType, Result>(
  type: Type,
  schema: Schema,
  handler: JobHandler<z.output<Schema>, Result>,
  options: JobOptions<NoInfer<Awaited<Result>>, NoInfer<z.input<Schema>>> = {},
): JobDefinition<Type, z.input<Schema>, Awaited<Result>> {
  checkType(type);
  checkOptions(type, options);
  const { publicResult, publicProgress } = options;
  const keysOf = definitionKeys(type, options);
  return {
    type,
    options: { ...options },
    // Results are stored as JSON, so the stored one is what the handler returned, through JSON.
    ...(publicResult === undefined ? {} : { publicResult: (result: Json) => publicResult(result as Awaited<Result>) }),
    ...(publicProgress === undefined ? {} : { publicProgress }),
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
    ...(options.tags === undefined ? {} : { tags: [...options.tags] }),
    ...(keysOf === undefined ? {} : { keysOf }),
    async checkPayload(payload) {
      const parsed = await safeParse(schema, payload);
      return parsed.success ? [] : payloadIssues(parsed.error);
    },
    async run(payload, context) {
      const parsed = await safeParse(schema, payload);
      if (!parsed.success) throw new InvalidPayloadError(type, payloadIssues(parsed.error));
      return handler(parsed.data, context);
    },
  };
}

/**
 * Parses without zod's async machinery (a promise per check) unless the
 * schema needs it: most payload schemas have no async refinement, and a
 * busy drain parses a payload per job.
 */
function safeParse<Schema extends z.ZodType>(
  schema: Schema,
  payload: unknown,
): z.ZodSafeParseResult<z.output<Schema>> | Promise<z.ZodSafeParseResult<z.output<Schema>>> {
  try {
    return schema.safeParse(payload);
  } catch (error) {
    if (error instanceof z.core.$ZodAsyncError) return schema.safeParseAsync(payload);
    throw error;
  }
}

function payloadIssues(error: z.ZodError): PayloadIssue[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/** The same rule as the HTTP API's names, so every defined type can be enqueued over HTTP too. */
function checkType(type: string): void {
  if (typeof type !== 'string' || type.length < 1 || type.length > 128 || !/^[^\p{Cc}\p{Cs}]+$/u.test(type)) {
    throw new RangeError(
      `job type ${JSON.stringify(type)}: a name is 1 to 128 characters, none of them control characters`,
    );
  }
}

/** The key fields a definition gives each job, from its payload: those of each of its key options. */
function definitionKeys<Payload>(
  type: string,
  options: JobOptions<unknown, Payload>,
): ((payload: unknown) => JobKeys) | undefined {
  const { concurrency, ordering, rateLimit, debounce, dedup } = options;
  const parts: Array<(payload: Payload) => JobKeys> = [];
  if (concurrency !== undefined) {
    parts.push((payload) => ({
      concurrencyKey: concurrency.key(payload),
      ...(concurrency.limit === undefined ? {} : { concurrencyLimit: concurrency.limit }),
    }));
  }
  if (ordering !== undefined) {
    parts.push((payload) => ({
      orderingKey: ordering.key(payload),
      ...(ordering.onFailure === undefined ? {} : { orderingOnFailure: ordering.onFailure }),
    }));
  }
  if (rateLimit !== undefined) {
    parts.push((payload) => ({
      rateKey: rateLimit.key === undefined ? type : rateLimit.key(payload),
      rateLimit: rateLimit.limit,
      ratePeriodSeconds: rateLimit.periodSeconds,
      ...(rateLimit.onExcess === undefined ? {} : { rateOnExcess: rateLimit.onExcess }),
    }));
  }
  if (debounce !== undefined) {
    parts.push((payload) => ({
      debounceKey: debounce.key(payload),
      debouncePeriodSeconds: debounce.periodSeconds,
      ...(debounce.maxDelaySeconds === undefined ? {} : { debounceMaxDelaySeconds: debounce.maxDelaySeconds }),
    }));
  }
  if (dedup !== undefined) {
    parts.push((payload) => ({
      dedupKey: dedup.key(payload),
      ...(dedup.onConflict === undefined ? {} : { dedupOnConflict: dedup.onConflict }),
      ...(dedup.scope === undefined ? {} : { dedupScope: dedup.scope }),
      ...(dedup.windowSeconds === undefined ? {} : { dedupWindowSeconds: dedup.windowSeconds }),
    }));
  }
  if (parts.length === 0) return undefined;
  return (payload) => Object.assign({}, ...parts.map((part) => part(payload as Payload)));
}

function checkOptions<Result, Payload>(type: string, options: JobOptions<Result, Payload>): void {
  const positive = (value: number | undefined) => value === undefined || (Number.isFinite(value) && value > 0);
  const problems = [
    options.leaseSeconds !== undefined &&
      !(Number.isInteger(options.leaseSeconds) && options.leaseSeconds >= 1) &&
      'leaseSeconds must be a whole number from 1',
    options.maxAttempts !== undefined &&
      !(Number.isInteger(options.maxAttempts) && options.maxAttempts >= 1) &&
      'maxAttempts must be an integer from 1',
    options.retentionSeconds !== undefined &&
      !isRetention(options.retentionSeconds) &&
      'retentionSeconds must be whole seconds from 60 (at most ten years), or "none"',
    !positive(options.timeoutSeconds) && 'timeoutSeconds must be above 0',
    options.subrequests !== undefined &&
      !(Number.isInteger(options.subrequests) && options.subrequests >= 0) &&
      'subrequests must be a whole number from 0',
    options.backoff !== undefined &&
      !(positive(options.backoff.baseSeconds) && options.backoff.maxSeconds >= options.backoff.baseSeconds) &&
      'backoff needs baseSeconds above 0 and maxSeconds >= baseSeconds',
    options.publicResult !== undefined &&
      typeof options.publicResult !== 'function' &&
      'publicResult must be a function',
    options.publicProgress !== undefined &&
      typeof options.publicProgress !== 'function' &&
      'publicProgress must be a function',
    [options.concurrency, options.ordering, options.rateLimit].filter((given) => given !== undefined).length > 1 &&
      'give one of concurrency, ordering and rateLimit',
    options.concurrency !== undefined &&
      typeof options.concurrency.key !== 'function' &&
      'concurrency.key must be a function of the payload',
    options.concurrency?.limit !== undefined &&
      !(
        Number.isInteger(options.concurrency.limit) &&
        options.concurrency.limit >= 1 &&
        options.concurrency.limit <= 1000
      ) &&
      'concurrency.limit must be an integer from 1 to 1000',
    options.ordering !== undefined &&
      typeof options.ordering.key !== 'function' &&
      'ordering.key must be a function of the payload',
    options.ordering?.onFailure !== undefined &&
      options.ordering.onFailure !== 'hold' &&
      options.ordering.onFailure !== 'continue' &&
      'ordering.onFailure must be hold or continue',
    options.tags !== undefined &&
      !(
        Array.isArray(options.tags) &&
        options.tags.length <= MAX_TAGS &&
        options.tags.every((tag) => typeof tag === 'string' && TAG_PATTERN.test(tag))
      ) &&
      `tags must be at most ${MAX_TAGS} tags, each ${TAG_SYNTAX}`,
    ...rateLimitProblems(options.rateLimit),
    ...debounceProblems(options),
  ].filter((problem) => problem !== false);
  if (problems.length > 0) throw new RangeError(`job type "${type}": ${problems.join('; ')}`);
}

function rateLimitProblems(rateLimit: JobOptions['rateLimit']): (string | false)[] {
  if (rateLimit === undefined) return [];
  const whole = (value: number, max: number) => Number.isInteger(value) && value >= 1 && value <= max;
  return [
    rateLimit.key !== undefined &&
      typeof rateLimit.key !== 'function' &&
      'rateLimit.key must be a function of the payload',
    !whole(rateLimit.limit, MAX_RATE_LIMIT) && `rateLimit.limit must be an integer from 1 to ${MAX_RATE_LIMIT}`,
    !whole(rateLimit.periodSeconds, MAX_RATE_PERIOD_SECONDS) &&
      `rateLimit.periodSeconds must be a whole number from 1 to ${MAX_RATE_PERIOD_SECONDS}`,
    rateLimit.onExcess !== undefined &&
      rateLimit.onExcess !== 'throttle' &&
      rateLimit.onExcess !== 'drop' &&
      'rateLimit.onExcess must be throttle or drop',
  ];
}

/** The debounce and dedup options' problems, as enqueue would refuse each job they make. */
function debounceProblems<Result, Payload>(options: JobOptions<Result, Payload>): Array<string | false> {
  const { debounce, dedup } = options;
  const wholeSeconds = (value: number | undefined, from: number) =>
    value === undefined || (Number.isInteger(value) && value >= from);
  return [
    debounce !== undefined && typeof debounce.key !== 'function' && 'debounce.key must be a function of the payload',
    debounce !== undefined &&
      !(debounce.periodSeconds !== undefined && wholeSeconds(debounce.periodSeconds, 1)) &&
      'debounce.periodSeconds must be a whole number from 1',
    debounce !== undefined &&
      !wholeSeconds(debounce.maxDelaySeconds, debounce.periodSeconds) &&
      'debounce.maxDelaySeconds must be a whole number of seconds from periodSeconds',
    debounce !== undefined &&
      (options.ordering !== undefined || dedup !== undefined) &&
      'debounce cannot combine with ordering (debounce folds jobs into one, ordering runs each) or dedup (the debounce key is the dedup key)',
    dedup !== undefined && typeof dedup.key !== 'function' && 'dedup.key must be a function of the payload',
    dedup?.onConflict !== undefined &&
      !['return', 'replace', 'refuse'].includes(dedup.onConflict) &&
      'dedup.onConflict must be return, replace or refuse',
    dedup?.scope !== undefined &&
      dedup.scope !== 'waiting' &&
      dedup.scope !== 'waitingOrRunning' &&
      'dedup.scope must be waiting or waitingOrRunning',
    dedup?.scope === 'waiting' &&
      (dedup.windowSeconds ?? 0) > 0 &&
      'dedup.windowSeconds must be 0 with the waiting scope, which never counts an ended job',
  ];
}
