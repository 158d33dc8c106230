import { inSpan, MESSAGING_SYSTEM, type Tracing } from '../engine/tracing.js';
import type { Queryable } from '../db/types.js';
import type { TraceContext } from '../engine/trace-context.js';
import type { EnqueueInput, TypedEnqueueOptions } from '../engine/enqueue.js';
import { typeInput, type JobType, type PayloadOf, type ResultOf } from '../engine/job-type.js';
import {
  invokeChildrenStep,
  loadSteps,
  MAX_WAIT_SECONDS,
  recordSteps,
  type StepAnswer,
  type StepToRecord,
  type StoredStep,
  sleepStep,
  stepFailed,
  stepKey,
  waitForEventStep,
} from '../engine/steps.js';
import type { ClaimedJob, Json } from '../engine/types.js';
import { retryDelaySeconds } from './backoff.js';
import type { Backoff } from './define-job.js';
import { AttemptInterruptedError, InvalidStepError, StepFailedError } from './job-errors.js';
import { toJobResult } from './job-result.js';

export interface StepOptions {
  /**
   * Attempts of this step, apart from the job's. Default 1: a failure fails
   * the job's attempt (which retries by the job's rules and runs the step
   * again). Above 1, a failure with attempts left parks the job for the
   * step's backoff, holding nothing, and the step runs again; the last
   * failure fails the job for good, naming the step.
   */
  maxAttempts?: number;
  /** The step's retry delays. Default 1 s doubling up to 5 minutes, with full jitter. */
  backoff?: Backoff;
}

/** A length of time: milliseconds, or text such as `'30 seconds'`, `'5 minutes'`, `'24 hours'`, `'7 days'`. */
export type Duration = number | `${number} ${DurationUnit}`;
type DurationUnit = 'second' | 'seconds' | 'minute' | 'minutes' | 'hour' | 'hours' | 'day' | 'days' | 'week' | 'weeks';

export interface WaitForEventOptions {
  event: string;
  /** Only an event sent with this key; an event of any key when left out. */
  key?: string;
  /** How long to wait before the step answers null. Default 24 hours, at most 366 days. */
  timeout?: Duration;
}

/** What `waitForEvent` returns: the event's payload and when it was sent. */
export interface ReceivedEvent<Payload = Json> {
  payload: Payload;
  sentAt: string;
}

/** How an invoked child ended. */
export type ChildEnd<Result = unknown> =
  | { ok: true; jobId: string; status: 'succeeded'; result: Result }
  | { ok: false; jobId: string; status: 'failed' | 'cancelled' | 'expired'; error: Json };

/**
 * Durable steps, `ctx.step` in a handler. Each step has a name, unique in
 * the job (the name is its memo key): once recorded, a later run of the job
 * (a retry, a resume, a new drain, a crash) gets the recorded result and
 * does not run it again. Sleeps, waits and invoked children park the job:
 * the attempt ends, nothing holds a slot, and the job runs again from the
 * top when it resumes, its recorded steps answering at once.
 */
export interface Steps {
  /** Runs `fn` once and records its result (JSON, at most 64 KiB). */
  do<T>(name: string, fn: () => T | Promise<T>, options?: StepOptions): Promise<Awaited<T>>;
  /** Parks the job for `duration`; never resumes early. */
  sleep(name: string, duration: Duration): Promise<void>;
  /** Parks the job until `when`; at once when it has passed. */
  sleepUntil(name: string, when: Date | string | number): Promise<void>;
  /**
   * Parks the job until an event of that name (and key) is sent to its
   * tenant, or the timeout passes (then null). An event sent after the job
   * was created and before the wait began, and kept (a day by default), is taken at once.
   */
  waitForEvent<Payload = Json>(name: string, options: WaitForEventOptions): Promise<ReceivedEvent<Payload> | null>;
  /** Enqueues a child job (in this job's tenant) and parks until it ends; answers how it ended. */
  invoke<J extends JobType>(
    name: string,
    job: J,
    payload: PayloadOf<J>,
    options?: TypedEnqueueOptions,
  ): Promise<ChildEnd<ResultOf<J>>>;
  invoke(name: string, job: EnqueueInput): Promise<ChildEnd>;
}

/** Thrown into the handler when a step parked the job: the attempt ends here. */
export class JobParkedSignal extends Error {
  override readonly name = 'JobParkedSignal';
  constructor(step: string) {
    super(`the job is parked at step "${step}" and resumes later; this attempt ends`);
  }
}

const DEFAULT_STEP_BACKOFF: Backoff = { baseSeconds: 1, maxSeconds: 300 };
const DEFAULT_EVENT_TIMEOUT_MS = 24 * 3600 * 1000;
const UNIT_MS: Record<string, number> = { second: 1e3, minute: 60e3, hour: 3600e3, day: 86_400e3, week: 604_800e3 };

/** The attempt a job's steps belong to: what they need of it. */
export interface StepsOwner {
  readonly job: ClaimedJob;
  readonly leaseSeconds: number;
  /** Stops the attempt (a lost lease, a cancellation seen by a step). */
  interrupt(reason: AttemptInterruptedError): void;
  /** Its drain's tracing: each `do` step that runs gets a span. */
  readonly tracing?: Tracing | undefined;
  /** The context of its attempt's span when the drain traces: the children it invokes keep it. */
  readonly traceContext?: TraceContext | undefined;
}

/**
 * One run's steps. Loads the job's recorded steps at the first step (one
 * statement, shared with the other jobs starting steps at that moment;
 * none on a job's first run), and
 * records each `do` step's result through the group commit of StepWrites.
 */
export class JobStepRunner implements Steps {
  private recorded: Promise<Map<string, StoredStep>> | undefined;
  private readonly usedNames = new Set<string>();
  /** Set once a step parked the job: the handler may catch the signal, but the attempt ends parked whatever it does. */
  parkedAt: string | undefined;
  /** A step was recorded in this run: the job moved forward, as saved progress does. */
  recordedAny = false;
  /** Invokes made in this turn, sent together. */
  private readonly invokes: Array<{
    name: string;
    child: EnqueueInput;
    resolve: (end: Json) => void;
    reject: (error: unknown) => void;
  }> = [];

  constructor(
    private readonly db: Queryable,
    private readonly owner: StepsOwner,
  ) {}

  /**
   * A step's function, in a span of its own under the attempt's (when the
   * drain traces): a recorded step that is returned again runs nothing, and has none.
   */
  private async traced<T>(name: string, fn: () => T | Promise<T>): Promise<Awaited<T>> {
    const { tracing, job } = this.owner;
    if (tracing === undefined) return await fn();
    return inSpan(
      tracing,
      `step ${name}`,
      {
        kind: 'internal',
        attributes: {
          'messaging.system': MESSAGING_SYSTEM,
          'messaging.message.id': job.id,
          'skiplock.step.name': name,
        },
      },
      () => fn(),
    );
  }

  async do<T>(name: string, fn: () => T | Promise<T>, options: StepOptions = {}): Promise<Awaited<T>> {
    const stored = await this.begin(name, 'do');
    if (stored?.done) return stored.result as Awaited<T>;
    const maxAttempts = options.maxAttempts ?? 1;
    if (!(Number.isInteger(maxAttempts) && maxAttempts >= 1)) {
      throw new InvalidStepError(name, 'maxAttempts must be an integer from 1');
    }
    let value: Awaited<T>;
    try {
      value = await this.traced(name, fn);
    } catch (error) {
      this.checkStillRunning();
      const failures = (stored?.failedAttempts ?? 0) + 1;
      if (failures >= maxAttempts) throw new StepFailedError(name, error, maxAttempts > 1);
      const delay = retryDelaySeconds(options.backoff ?? DEFAULT_STEP_BACKOFF, failures);
      const answer = await stepFailed(
        this.db,
        this.owner.job,
        name,
        errorJson(error),
        new Date(Date.now() + delay * 1000),
      );
      return this.settle(name, answer) as never;
    }
    this.checkStillRunning();
    const result = toJobResult(value);
    if (!result.ok) throw new InvalidStepError(name, result.problem.replace("the handler's result", 'its result'));
    const written = await store(this.db).record({
      id: this.owner.job.id,
      leaseToken: this.owner.job.leaseToken,
      name,
      result: result.value,
      leaseSeconds: this.owner.leaseSeconds,
    });
    if (!written) this.lostLease(name);
    this.recordedAny = true;
    return result.value as Awaited<T>;
  }

  sleep(name: string, duration: Duration): Promise<void> {
    const ms = durationMs(duration, name, 'duration');
    return this.sleepUntilTime(name, Date.now() + ms);
  }

  sleepUntil(name: string, when: Date | string | number): Promise<void> {
    const time = when instanceof Date ? when.getTime() : typeof when === 'number' ? when : Date.parse(when);
    if (!Number.isFinite(time))
      throw new InvalidStepError(name, 'sleepUntil takes a Date, an ISO-8601 time or epoch milliseconds');
    return this.sleepUntilTime(name, time);
  }

  private async sleepUntilTime(name: string, time: number): Promise<void> {
    const stored = await this.begin(name, 'sleep');
    const until = stored === undefined ? time : Date.parse((stored.result as { until: string }).until);
    if (stored !== undefined && until <= Date.now()) return;
    if (until - Date.now() > MAX_WAIT_SECONDS * 1000) {
      throw new InvalidStepError(name, `a sleep lasts at most ${MAX_WAIT_SECONDS / 86_400} days`);
    }
    this.settle(name, await sleepStep(this.db, this.owner.job, name, new Date(until)));
  }

  async waitForEvent<Payload = Json>(
    name: string,
    options: WaitForEventOptions,
  ): Promise<ReceivedEvent<Payload> | null> {
    const stored = await this.begin(name, 'event');
    if (stored?.done) return stored.result as ReceivedEvent<Payload> | null;
    if (typeof options?.event !== 'string' || options.event.length < 1 || options.event.length > 200) {
      throw new InvalidStepError(name, 'event must be a name of 1 to 200 characters');
    }
    if (
      options.key !== undefined &&
      (typeof options.key !== 'string' || options.key.length < 1 || options.key.length > 200)
    ) {
      throw new InvalidStepError(name, 'key must be 1 to 200 characters when given');
    }
    const timeoutMs =
      options.timeout === undefined ? DEFAULT_EVENT_TIMEOUT_MS : durationMs(options.timeout, name, 'timeout');
    const answer = await waitForEventStep(this.db, this.owner.job, {
      name,
      event: options.event,
      key: options.key,
      timeoutAt: new Date(Date.now() + timeoutMs),
      leaseSeconds: this.owner.leaseSeconds,
    });
    return this.settle(name, answer) as ReceivedEvent<Payload> | null;
  }

  invoke<J extends JobType>(
    name: string,
    job: J,
    payload: PayloadOf<J>,
    options?: TypedEnqueueOptions,
  ): Promise<ChildEnd<ResultOf<J>>>;
  invoke(name: string, job: EnqueueInput): Promise<ChildEnd>;
  async invoke(
    name: string,
    job: JobType | EnqueueInput,
    payload?: unknown,
    options: TypedEnqueueOptions = {},
  ): Promise<ChildEnd> {
    const stored = await this.begin(name, 'invoke');
    if (stored?.done) return childEnd(stored.result);
    let child: EnqueueInput;
    if ('checkPayload' in job) {
      const [issue] = await job.checkPayload(payload);
      if (issue !== undefined) {
        const field = ['payload', issue.path].filter((part) => part !== '').join('.');
        throw new InvalidStepError(name, `the child's ${field}: ${issue.message}`);
      }
      child = typeInput(job, payload, { queue: job.type, ...options, type: job.type, payload: payload as Json });
    } else {
      child = job;
    }
    return childEnd(await this.invokeWithOthers(name, this.inTrace(child)));
  }

  /**
   * The child as it is enqueued: in its parent's trace when the drain
   * traces, its attempts' spans under the parent attempt's, unless it names
   * a context of its own. Without tracing, as given: it keeps no context.
   */
  private inTrace(child: EnqueueInput): EnqueueInput {
    const context = this.owner.traceContext;
    if (context === undefined || child.traceparent !== undefined) return child;
    return { ...child, ...context };
  }

  /**
   * Sends this invoke with the others the handler made in the same turn
   * (`Promise.all`), in one statement: the parent parks once, until all of
   * their children have ended.
   */
  private invokeWithOthers(name: string, child: EnqueueInput): Promise<Json> {
    return new Promise((resolve, reject) => {
      const first = this.invokes.length === 0;
      this.invokes.push({ name, child, resolve, reject });
      if (first) void nextTurn().then(() => this.sendInvokes());
    });
  }

  private async sendInvokes(): Promise<void> {
    const invokes = this.invokes.splice(0);
    try {
      const answer = await invokeChildrenStep(this.db, this.owner.job, invokes, this.owner.leaseSeconds).catch(
        (error: unknown) => {
          if (error instanceof Error && error.name === 'InvalidInputError') {
            throw new InvalidStepError(invokes[0]!.name, error.message);
          }
          throw error;
        },
      );
      const ends = this.settle(invokes.map((each) => each.name).join(', '), answer) as Record<string, Json>;
      for (const each of invokes) each.resolve(ends[each.name] ?? null);
    } catch (error) {
      for (const each of invokes) each.reject(error);
    }
  }

  /** The step's record from an earlier run, after checking its name is new in this run. */
  private async begin(name: string, kind: StoredStep['kind']): Promise<StoredStep | undefined> {
    if (this.parkedAt !== undefined) throw new JobParkedSignal(this.parkedAt);
    if (typeof name !== 'string' || name.length < 1 || name.length > 200) {
      throw new InvalidStepError(String(name), 'a step name is 1 to 200 characters');
    }
    if (this.usedNames.has(name)) throw new InvalidStepError(name, 'the name is used by another step of this run');
    this.usedNames.add(name);
    this.recorded ??= isFirstRun(this.owner.job) ? Promise.resolve(new Map()) : store(this.db).load(this.owner.job.id);
    const stored = (await this.recorded).get(name);
    if (stored !== undefined && stored.kind !== kind) {
      throw new InvalidStepError(name, `it was recorded as a ${stored.kind} step, not a ${kind} step`);
    }
    return stored;
  }

  /** The result of a step that may have parked the job, or the end of the attempt. */
  private settle(name: string, answer: StepAnswer): Json {
    switch (answer.status) {
      case 'done':
        return answer.result;
      case 'parked':
        this.parkedAt = name;
        throw new JobParkedSignal(name);
      case 'lease-lost':
        return this.lostLease(name);
      case 'cancel-requested': {
        const reason = new AttemptInterruptedError('cancelled', `at step "${name}"`);
        this.owner.interrupt(reason);
        throw reason;
      }
    }
  }

  private lostLease(name: string): never {
    const reason = new AttemptInterruptedError('lease-lost', `at step "${name}"`);
    this.owner.interrupt(reason);
    throw reason;
  }

  /** A step run beside one that parked the job (in Promise.all) records nothing. */
  private checkStillRunning(): void {
    if (this.parkedAt !== undefined) throw new JobParkedSignal(this.parkedAt);
  }
}

/**
 * A job claimed for the first time (its first start is this claim's) has
 * recorded no step yet: every step needs an earlier run, so there is nothing to load.
 */
function isFirstRun(job: ClaimedJob): boolean {
  return job.firstStartedAt !== null && job.firstStartedAt === job.startedAt;
}

function childEnd(result: Json): ChildEnd {
  const end = result as { jobId: string; status: string; result: Json; error: Json };
  if (end.status === 'succeeded') return { ok: true, jobId: end.jobId, status: 'succeeded', result: end.result };
  return { ok: false, jobId: end.jobId, status: end.status as 'failed' | 'cancelled' | 'expired', error: end.error };
}

function durationMs(duration: Duration, step: string, field: string): number {
  let ms: number | undefined;
  if (typeof duration === 'number') ms = duration;
  else if (typeof duration === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(second|minute|hour|day|week)s?\s*$/.exec(duration);
    if (match) ms = Number(match[1]) * UNIT_MS[match[2]!]!;
  }
  if (ms === undefined || !Number.isFinite(ms) || ms < 0 || ms > MAX_WAIT_SECONDS * 1000) {
    throw new InvalidStepError(
      step,
      `${field} must be milliseconds or text such as "5 minutes", from 0 to ${MAX_WAIT_SECONDS / 86_400} days`,
    );
  }
  return ms;
}

function errorJson(error: unknown): Json {
  return error instanceof Error
    ? { name: error.name, message: error.message }
    : { name: 'Error', message: String(error) };
}

/** Waits for the other continuations ready now, so they join the same statement. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) =>
    typeof setImmediate === 'function' ? setImmediate(resolve) : setTimeout(resolve, 0),
  );
}

/**
 * A group commit: what is asked while a statement is out (and in the same
 * turn as the first) goes out together in the next. One per database, so
 * the steps of every job a drain runs share statements.
 */
class GroupCommit<In, Out> {
  private pending: Array<{ input: In; resolve: (out: Out) => void; reject: (error: unknown) => void }> = [];
  private sending: Promise<void> | undefined;

  constructor(private readonly send: (inputs: In[]) => Promise<Out[]>) {}

  add(input: In): Promise<Out> {
    return new Promise((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      this.sending ??= this.sendAll();
    });
  }

  private async sendAll(): Promise<void> {
    for (await nextTurn(); this.pending.length > 0; await nextTurn()) {
      const batch = this.pending.splice(0, 500);
      try {
        const outs = await this.send(batch.map((each) => each.input));
        for (const [index, each] of batch.entries()) each.resolve(outs[index]!);
      } catch (error) {
        for (const each of batch) each.reject(error);
      }
    }
    this.sending = undefined;
  }
}

interface StepStore {
  record(step: StepToRecord): Promise<boolean>;
  load(jobId: string): Promise<Map<string, StoredStep>>;
}

const stores = new WeakMap<Queryable, StepStore>();

function store(db: Queryable): StepStore {
  let found = stores.get(db);
  if (found === undefined) {
    const writes = new GroupCommit<StepToRecord, boolean>(async (steps) => {
      const recorded = await recordSteps(db, steps);
      return steps.map((step) => recorded.has(stepKey(step.id, step.name)));
    });
    const reads = new GroupCommit<string, Map<string, StoredStep>>(async (jobIds) => {
      const byJob = await loadSteps(db, [...new Set(jobIds)]);
      return jobIds.map((id) => new Map((byJob.get(id) ?? []).map((step) => [step.name, step])));
    });
    found = { record: (step) => writes.add(step), load: (jobId) => reads.add(jobId) };
    stores.set(db, found);
  }
  return found;
}
