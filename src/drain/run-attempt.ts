import type { Queryable } from '../db/types.js';
import type { ClaimedJob, Json } from '../engine/types.js';
import type { Tracing } from '../engine/tracing.js';
import type { TraceContext } from '../engine/trace-context.js';
import { AttemptLease } from './attempt-lease.js';
import { releasedWhenRead, type ConnectionGate } from './connection-gate.js';
import { retryDelaySeconds } from './backoff.js';
import type { JobContext, JobDefinition } from './define-job.js';
import type { Beating } from './heartbeat.js';
import { dependencyEnds, type DependencyEnd } from '../engine/flows.js';
import {
  AttemptInterruptedError,
  InvalidPayloadError,
  InvalidStepError,
  PermanentError,
  RetryAfterError,
  StepFailedError,
} from './job-errors.js';
import { JobStepRunner, type Steps, type StepsOwner } from './steps.js';
import { toJobResult } from './job-result.js';
import { withFields, type Logger } from './logger.js';
import type { SubrequestBudget } from './subrequest-budget.js';

/** What an attempt's I/O is counted against, where the invocation limits it (Workers). */
export interface AttemptIo {
  connections?: ConnectionGate | undefined;
  subrequests?: SubrequestBudget | undefined;
}

/** The trace an attempt runs in, when its drain traces: its span's context, and the tracing its steps' spans come from. */
export interface AttemptTrace {
  traceContext?: TraceContext | undefined;
  tracing?: Tracing | undefined;
}

/** How an attempt ended, and so what the drain writes. */
export type AttemptOutcome =
  | { kind: 'succeeded'; result: Json }
  | { kind: 'failed'; error: Json; forGood: boolean; retryInSeconds?: number }
  /** Stopped by the drain's deadline: back to the queue, to continue in a later drain. */
  | { kind: 'handed-back'; countAttempt: boolean }
  | { kind: 'cancelled'; error: Json }
  /** The token no longer owns the job: write nothing. */
  | { kind: 'lease-lost' }
  /** A step parked the job (waiting again, its lease handed back): write nothing. */
  | { kind: 'parked' };

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * One attempt of a claimed job (its claim sent at `claimSentAt`), and the
 * context its handler gets. It runs the handler until it settles or the
 * attempt is interrupted (deadline, timeout, cancel, lost lease); a handler
 * that ignores the interruption is not waited for, and its lease is closed,
 * so whatever it does later changes nothing. Its heartbeats come from the
 * loop's HeartbeatSchedule.
 *
 * Most attempts of a busy queue last microseconds, so an attempt costs what
 * it uses: the abort signal and the job's logger are made when the handler
 * first asks for them.
 */
export class Attempt implements JobContext, Beating, StepsOwner {
  readonly attempt: number;
  readonly leaseSeconds: number;
  readonly traceContext: TraceContext | undefined;
  readonly tracing: Tracing | undefined;
  private steps: JobStepRunner | undefined;
  private readonly lease: AttemptLease;
  private interruption: AttemptInterruptedError | undefined;
  private controller: AbortController | undefined;
  private logger: Logger | undefined;
  private onInterrupt: (() => void) | undefined;
  private fetches = 0;
  /** Connections its fetches still hold: released when the attempt ends, whatever the handler left unread. */
  private heldConnections: Set<() => void> | undefined;

  constructor(
    private readonly db: Queryable,
    readonly job: ClaimedJob,
    claimSentAt: number,
    private readonly definition: JobDefinition,
    private readonly loopLogger: Logger,
    private readonly io: AttemptIo = {},
    trace: AttemptTrace = {},
  ) {
    this.traceContext = trace.traceContext;
    this.tracing = trace.tracing;
    this.attempt = job.attempts;
    const leaseSeconds = definition.options.leaseSeconds ?? job.leaseSeconds;
    this.leaseSeconds = leaseSeconds;
    this.lease = new AttemptLease(db, job, leaseSeconds, claimSentAt, (reason) => this.interrupt(reason));
  }

  get traceparent(): string | undefined {
    return this.traceContext?.traceparent;
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.interruption !== undefined) this.controller.abort(this.interruption);
    }
    return this.controller.signal;
  }

  get log(): Logger {
    return (this.logger ??= withFields(this.loopLogger, {
      jobId: this.job.id,
      type: this.job.type,
      attempt: this.attempt,
    }));
  }

  extendLease(leaseSeconds?: number): Promise<void> {
    return this.lease.extend(leaseSeconds === undefined ? {} : { leaseSeconds });
  }

  async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    this.io.subrequests?.spend();
    this.fetches += 1;
    const withSignal = { ...init, signal: init?.signal ?? this.signal };
    if (this.io.connections === undefined) return fetch(input, withSignal);
    const release = await this.io.connections.enter(true);
    const held = (this.heldConnections ??= new Set());
    held.add(release);
    const releaseOnce = () => {
      held.delete(release);
      release();
    };
    try {
      return releasedWhenRead(await fetch(input, withSignal), releaseOnce);
    } catch (error) {
      releaseOnce();
      throw error;
    }
  }

  /** Fetches made through `fetch`: counted as they went, so not again among the declared subrequests. */
  get fetchesSent(): number {
    return this.fetches;
  }

  get step(): Steps {
    return (this.steps ??= new JobStepRunner(this.db, this));
  }

  dependencies(): Promise<DependencyEnd[]> {
    return dependencyEnds(this.db, this.job.id);
  }

  progress(value: Json): Promise<void> {
    return this.lease.extend({ progress: value });
  }

  get heartbeatDueAt(): number {
    return this.lease.heartbeatDueAt;
  }

  beat(): Promise<void> {
    return this.lease.beat(this.log);
  }

  /** Stops the attempt (the first reason wins): the handler's signal fires, and the attempt stops waiting for it. */
  interrupt(reason: AttemptInterruptedError): void {
    if (this.interruption !== undefined) return;
    this.interruption = reason;
    this.controller?.abort(reason);
    this.onInterrupt?.();
  }

  /** Runs the handler to its end or the attempt's interruption, and says what becomes of the job. */
  async run(): Promise<AttemptOutcome> {
    const { timeoutSeconds } = this.definition.options;
    const timeout =
      timeoutSeconds === undefined
        ? undefined
        : setTimeout(
            () => this.interrupt(new AttemptInterruptedError('timeout', `${timeoutSeconds} s`)),
            timeoutSeconds * 1000,
          );
    try {
      const settled = await this.settleUnlessInterrupted();
      // A step parked the job, which is waiting again: whatever the handler did after.
      if (this.steps?.parkedAt !== undefined) return { kind: 'parked' };
      // Interrupted, or threw because it was: either way the interruption decides.
      if (this.interruption !== undefined) return this.interruptedOutcome(this.interruption);
      return settledOutcome(settled!, this.job, this.definition);
    } finally {
      clearTimeout(timeout);
      if (this.heldConnections !== undefined) {
        for (const release of this.heldConnections) release();
        this.heldConnections.clear();
      }
      const heartbeat = this.lease.end();
      if (heartbeat !== undefined) await heartbeat;
    }
  }

  /** The handler's settlement, or undefined as soon as the attempt is interrupted. */
  private settleUnlessInterrupted(): Promise<Settled | undefined> {
    return new Promise((resolve) => {
      if (this.interruption !== undefined) return resolve(undefined);
      this.onInterrupt = () => resolve(undefined);
      this.definition.run(this.job.payload, this).then(
        (value) => resolve({ ok: true, value }),
        (error: unknown) => resolve({ ok: false, error }),
      );
    });
  }

  private interruptedOutcome(reason: AttemptInterruptedError): AttemptOutcome {
    switch (reason.why) {
      case 'lease-lost':
        return { kind: 'lease-lost' };
      case 'cancelled':
        return { kind: 'cancelled', error: errorJson(reason) };
      case 'timeout':
        return failureOutcome(reason, this.job, this.definition);
      case 'deadline':
        // An attempt that saved progress moved forward and continues from it:
        // that costs no attempt. One that did not restarts from scratch, so it
        // counts; a job that can never fit in a drain then fails in the end
        // instead of looping forever.
        return { kind: 'handed-back', countAttempt: !(this.lease.progressSaved || this.steps?.recordedAny) };
    }
  }
}

function settledOutcome(settled: Settled, job: ClaimedJob, definition: JobDefinition): AttemptOutcome {
  if (settled.ok) {
    const result = toJobResult(settled.value);
    if (result.ok) return { kind: 'succeeded', result: result.value };
    return { kind: 'failed', error: { name: 'InvalidResultError', message: result.problem }, forGood: true };
  }
  return failureOutcome(settled.error, job, definition);
}

function failureOutcome(error: unknown, job: ClaimedJob, definition: JobDefinition): AttemptOutcome {
  if (error instanceof PermanentError || (error instanceof StepFailedError && error.forGood)) {
    return { kind: 'failed', error: errorJson(error), forGood: true };
  }
  const { maxAttempts, backoff } = definition.options;
  const forGood = maxAttempts !== undefined && job.attempts >= maxAttempts;
  if (error instanceof RetryAfterError)
    return { kind: 'failed', error: errorJson(error), forGood, retryInSeconds: error.seconds };
  return {
    kind: 'failed',
    error: errorJson(error),
    forGood,
    ...(backoff === undefined ? {} : { retryInSeconds: retryDelaySeconds(backoff, job.attempts) }),
  };
}

/** What the job's lastError shows: name and message (and the schema issues, the delay, the interruption), never a stack. */
function errorJson(error: unknown): Json {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const described: { [key: string]: Json } = { name: error.name, message: error.message };
  if (error instanceof AttemptInterruptedError) described.why = error.why;
  if (error instanceof InvalidPayloadError)
    described.issues = error.issues.map(({ path, message }) => ({ path, message }));
  if (error instanceof RetryAfterError) described.retryInSeconds = error.seconds;
  if (error instanceof StepFailedError || error instanceof InvalidStepError) described.step = error.step;
  return described;
}
