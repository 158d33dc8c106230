import type { z } from 'zod';
import { defineJob, type JobContext, type JobDefinition, type JobOptions } from './define-job.js';
import { InvalidBatchOutcomeError } from './job-errors.js';
import type { Logger } from './logger.js';

/** One job of a batch: its id, parsed payload, and its own context (progress, lease, signal). */
export interface BatchItem<Payload> {
  readonly id: string;
  readonly payload: Payload;
  readonly context: JobContext;
}

/**
 * How one job of a batch ended: its result, or the error its attempt fails
 * with (a `RetryAfterError` or `PermanentError` steers it as a thrown one would).
 */
export type BatchOutcome<Result> = { result: Result } | { error: unknown };

/** Outcomes by job id: a Map or a plain object. */
export type BatchOutcomes<Result> =
  | ReadonlyMap<string, BatchOutcome<Result>>
  | Readonly<Record<string, BatchOutcome<Result>>>;

/** What a batch handler gets beside its jobs. */
export interface BatchContext {
  /** Fires when every job of the batch has been stopped (the drain's deadline, their timeouts, cancels). */
  readonly signal: AbortSignal;
  /** `fetch` through the drain, counted against the first job's attempt; aborted by `signal` unless `init` brings one. */
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
  readonly log: Logger;
}

/**
 * Receives up to `batchSize` jobs at once and says how each ended. Throwing
 * fails every job of the batch with that error.
 */
export type BatchJobHandler<Payload, Result> = (
  jobs: ReadonlyArray<BatchItem<Payload>>,
  context: BatchContext,
) => BatchOutcomes<Result> | Promise<BatchOutcomes<Result>>;

export interface BatchJobOptions<Result = unknown> extends JobOptions<Result> {
  /** The most jobs one call receives, 1 to 1,000; default 100. */
  batchSize?: number;
  /**
   * How long the first job of a batch waits for more (ms); default 0: the
   * batch is the jobs the drain starts together, which its claim and its
   * concurrency (jobs in flight) bound.
   */
  lingerMs?: number;
}

interface Waiting<Payload, Result> {
  item: BatchItem<Payload>;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/**
 * Defines a job type whose handler takes its jobs in batches: one call per
 * batch (one bulk insert, one API call for many rows), with an outcome per
 * job, so some succeed, some fail and some retry. Each job is still its own
 * attempt: leased, heartbeated, stopped and recorded as a single job is, and
 * a payload that does not fit the schema fails alone, before any batch.
 */
export function defineBatchJob<const Type extends string, Schema extends z.ZodType, Result>(
  type: Type,
  schema: Schema,
  handler: BatchJobHandler<z.output<Schema>, Result>,
  options: BatchJobOptions<NoInfer<Awaited<Result>>> = {},
): JobDefinition<Type, z.input<Schema>, Awaited<Result>> {
  const { batchSize = 100, lingerMs = 0, ...jobOptions } = options;
  if (!(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 1000)) {
    throw new RangeError(`job type "${type}": batchSize must be a whole number from 1 to 1000`);
  }
  if (!(Number.isFinite(lingerMs) && lingerMs >= 0))
    throw new RangeError(`job type "${type}": lingerMs must be 0 or more`);
  const batches = new BatchCollector<z.output<Schema>, Result>(type, handler, batchSize, lingerMs);
  return defineJob(type, schema, (payload, context) => batches.add(payload, context), jobOptions);
}

/**
 * Gathers the jobs whose attempts start within `lingerMs` of a batch's first
 * (drains sharing an isolate share batches: each job's outcome still goes
 * back to its own attempt) and calls the handler once per batch.
 */
class BatchCollector<Payload, Result> {
  private waiting: Array<Waiting<Payload, Result>> = [];
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly type: string,
    private readonly handler: BatchJobHandler<Payload, Result>,
    private readonly batchSize: number,
    private readonly lingerMs: number,
  ) {}

  add(payload: Payload, context: JobContext): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item: { id: context.job.id, payload, context }, resolve, reject });
      if (this.waiting.length >= this.batchSize) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.lingerMs);
    });
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.waiting.splice(0, this.batchSize);
    if (this.waiting.length > 0) this.timer = setTimeout(() => this.flush(), this.lingerMs);
    void this.call(batch);
  }

  private async call(batch: Array<Waiting<Payload, Result>>): Promise<void> {
    let outcomes: BatchOutcomes<Result>;
    try {
      outcomes = await this.handler(
        batch.map((waiting) => waiting.item),
        batchContext(batch.map((waiting) => waiting.item.context)),
      );
    } catch (error) {
      for (const waiting of batch) waiting.reject(error);
      return;
    }
    const byId = outcomeMap(outcomes);
    if (byId === undefined)
      return this.refuse(batch, 'the handler must return outcomes by job id (a Map or an object)');
    const given = new Set(batch.map((waiting) => waiting.item.id));
    const strangers = [...byId.keys()].filter((id) => !given.has(id));
    if (strangers.length > 0)
      return this.refuse(batch, `outcomes for jobs this batch was not given: ${strangers.join(', ')}`);
    for (const { item, resolve, reject } of batch) {
      const outcome: unknown = byId.get(item.id);
      if (isOutcome(outcome, 'result')) resolve(outcome.result as Result);
      else if (isOutcome(outcome, 'error')) reject(outcome.error);
      else if (outcome === undefined) reject(new InvalidBatchOutcomeError(this.type, `no outcome for job ${item.id}`));
      else
        reject(
          new InvalidBatchOutcomeError(this.type, `the outcome for job ${item.id} is neither { result } nor { error }`),
        );
    }
  }

  private refuse(batch: Array<Waiting<Payload, Result>>, problem: string): void {
    const error = new InvalidBatchOutcomeError(this.type, problem);
    for (const waiting of batch) waiting.reject(error);
  }
}

function outcomeMap<Result>(outcomes: BatchOutcomes<Result>): ReadonlyMap<string, unknown> | undefined {
  if (outcomes instanceof Map) return outcomes;
  if (typeof outcomes !== 'object' || outcomes === null || Array.isArray(outcomes)) return undefined;
  return new Map(Object.entries(outcomes));
}

function isOutcome<Key extends 'result' | 'error'>(outcome: unknown, key: Key): outcome is Record<Key, unknown> {
  return typeof outcome === 'object' && outcome !== null && key in outcome;
}

/** The batch's signal fires once every job's has; fetches and logs go through the first job's context. */
function batchContext(contexts: readonly JobContext[]): BatchContext {
  const controller = new AbortController();
  let stopped = 0;
  for (const context of contexts) {
    const stop = () => {
      stopped += 1;
      if (stopped === contexts.length) controller.abort(context.signal.reason);
    };
    if (context.signal.aborted) stop();
    else context.signal.addEventListener('abort', stop, { once: true });
  }
  const first = contexts[0]!;
  return {
    signal: controller.signal,
    fetch: (input, init) => first.fetch(input, { ...init, signal: init?.signal ?? controller.signal }),
    log: first.log,
  };
}
