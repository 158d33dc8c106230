import type { Queryable } from '../db/types.js';
import type { ClaimedJob, Json } from '../engine/types.js';
import { AttemptLease } from './attempt-lease.js';
import { retryDelaySeconds } from './backoff.js';
import type { DrainBudget } from './budget.js';
import type { JobContext, JobDefinition } from './define-job.js';
import { Heartbeat } from './heartbeat.js';
import { AttemptInterrupted, InvalidPayload, PermanentFailure, RetryAfter } from './job-errors.js';
import { toJobResult } from './job-result.js';
import type { Logger } from './logger.js';

/** How an attempt ended, and so what the drain writes. */
export type AttemptOutcome =
  | { kind: 'succeeded'; result: Json }
  | { kind: 'failed'; error: Json; forGood: boolean; retryInSeconds?: number }
  /** Stopped by the drain's deadline: back to the queue, to continue in a later drain. */
  | { kind: 'handed-back'; countAttempt: boolean }
  | { kind: 'cancelled' }
  /** The token no longer owns the job: write nothing. */
  | { kind: 'lease-lost' };

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs one claimed job (its claim sent at `claimSentAt`): the handler and its
 * heartbeat side by side, until the handler settles or the attempt's signal
 * fires (deadline, timeout, cancel, lost lease). A handler that ignores the
 * signal is not waited for; its lease is closed, so whatever it does later
 * changes nothing.
 */
export async function runAttempt(
  db: Queryable,
  job: ClaimedJob,
  claimSentAt: number,
  definition: JobDefinition,
  budget: DrainBudget,
  log: Logger,
): Promise<AttemptOutcome> {
  const interruption = new AbortController();
  const interrupt = (reason: Error) => interruption.abort(reason);
  const { signal } = interruption;
  const stopListening = budget.onDeadline(interrupt);
  const { timeoutSeconds } = definition.options;
  const timeout =
    timeoutSeconds === undefined
      ? undefined
      : setTimeout(() => interrupt(new AttemptInterrupted('timeout', `${timeoutSeconds} s`)), timeoutSeconds * 1000);
  const lease = new AttemptLease(db, job, definition.options.leaseSeconds ?? job.leaseSeconds, claimSentAt, interrupt);
  const context: JobContext = {
    job,
    attempt: job.attempts,
    signal,
    log,
    extendLease: (leaseSeconds) => lease.extend(leaseSeconds === undefined ? {} : { leaseSeconds }),
    progress: (value) => lease.extend({ progress: value }),
  };
  const heartbeat = new Heartbeat(lease, log);
  try {
    const [settled] = await Promise.all([
      settleUnlessAborted(definition.run(job.payload, context), signal).finally(() => heartbeat.stop()),
      heartbeat.run(),
    ]);
    // Interrupted, or threw because the signal fired: either way the signal's reason decides.
    if (settled === undefined || signal.aborted) return interruptedOutcome(signal.reason, lease, job, definition);
    return settledOutcome(settled, job, definition);
  } finally {
    stopListening();
    clearTimeout(timeout);
    lease.end();
  }
}

/** The handler's settlement, or undefined as soon as `signal` fires. */
function settleUnlessAborted(work: Promise<unknown>, signal: AbortSignal): Promise<Settled | undefined> {
  return new Promise((resolve) => {
    const onAbort = () => resolve(undefined);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(
      (value) => resolve({ ok: true, value }),
      (error: unknown) => resolve({ ok: false, error }),
    ).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function interruptedOutcome(reason: unknown, lease: AttemptLease, job: ClaimedJob, definition: JobDefinition): AttemptOutcome {
  const why = reason instanceof AttemptInterrupted ? reason.why : 'deadline';
  if (why === 'lease-lost') return { kind: 'lease-lost' };
  if (why === 'cancelled') return { kind: 'cancelled' };
  if (why === 'timeout') return failureOutcome(reason, job, definition);
  // The deadline. An attempt that saved progress moved forward and continues
  // from it: that costs no attempt. One that did not restarts from scratch,
  // so it counts; a job that can never fit in a drain then fails in the end
  // instead of looping forever.
  return { kind: 'handed-back', countAttempt: !lease.progressSaved };
}

function settledOutcome(settled: Settled, job: ClaimedJob, definition: JobDefinition): AttemptOutcome {
  if (settled.ok) {
    const result = toJobResult(settled.value);
    if (result.ok) return { kind: 'succeeded', result: result.value };
    return { kind: 'failed', error: { name: 'InvalidResult', message: result.problem }, forGood: true };
  }
  return failureOutcome(settled.error, job, definition);
}

function failureOutcome(error: unknown, job: ClaimedJob, definition: JobDefinition): AttemptOutcome {
  if (error instanceof PermanentFailure) return { kind: 'failed', error: errorJson(error), forGood: true };
  const { maxAttempts, backoff } = definition.options;
  const forGood = maxAttempts !== undefined && job.attempts >= maxAttempts;
  if (error instanceof RetryAfter) return { kind: 'failed', error: errorJson(error), forGood, retryInSeconds: error.seconds };
  return {
    kind: 'failed',
    error: errorJson(error),
    forGood,
    ...(backoff === undefined ? {} : { retryInSeconds: retryDelaySeconds(backoff, job.attempts) }),
  };
}

/** What the job's lastError shows: name and message (and the schema issues), never a stack. */
function errorJson(error: unknown): Json {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const described: { [key: string]: Json } = { name: error.name, message: error.message };
  if (error instanceof InvalidPayload) described.issues = error.issues.map(({ path, message }) => ({ path, message }));
  if (error instanceof RetryAfter) described.retryInSeconds = error.seconds;
  return described;
}
