/**
 * What a handler throws to steer its job, and why an attempt was stopped.
 * Any other error a handler throws retries the job after its backoff.
 */

/** Retry after exactly this long instead of the backoff (a rate limit said when). */
export class RetryAfterError extends Error {
  override readonly name = 'RetryAfterError';
  constructor(
    readonly seconds: number,
    message = `asked to retry after ${seconds} s`,
  ) {
    super(message);
    if (!(Number.isFinite(seconds) && seconds >= 0)) throw new RangeError('RetryAfterError takes seconds >= 0');
  }
}

/** The job can never succeed (bad input, a refusal that will not change): fail it now, no retries. */
export class PermanentError extends Error {
  override readonly name: string = 'PermanentError';
}

/** The payload does not match the job type's schema; thrown before the handler runs. */
export class InvalidPayloadError extends PermanentError {
  override readonly name = 'InvalidPayloadError';
  constructor(
    type: string,
    readonly issues: ReadonlyArray<{ path: string; message: string }>,
  ) {
    super(`payload does not match the schema of job type "${type}": ${issues.map(describeIssue).join('; ')}`);
  }
}

function describeIssue(issue: { path: string; message: string }): string {
  return issue.path === '' ? issue.message : `${issue.path}: ${issue.message}`;
}

/** Each interruption's message. */
const INTERRUPTIONS = {
  /** The drain's time budget is spent: the job is handed back and continues later. */
  deadline: 'the drain reached the end of its time budget; the job is handed back to run again',
  /** The attempt ran longer than its job type's `timeoutSeconds`: it fails and may retry. */
  timeout: 'the attempt ran longer than its timeout',
  /** Someone cancelled the running job; its heartbeat saw it. */
  cancelled: 'the job was cancelled while it ran',
  /** The token no longer owns the job (its lease ran out and it was taken back): stop, change nothing. */
  'lease-lost': 'the lease was lost: another claim owns this job now',
} as const;

export type Interruption = keyof typeof INTERRUPTIONS;

/**
 * Why an attempt's abort signal fired: the handler sees it as
 * `context.signal.reason` (check `why`), and the drain decides from it what
 * becomes of the job. A job that ends by it keeps `why` in its lastError.
 */
export class AttemptInterruptedError extends Error {
  override readonly name = 'AttemptInterruptedError';
  constructor(
    readonly why: Interruption,
    detail?: string,
  ) {
    const message = INTERRUPTIONS[why];
    super(detail === undefined ? message : `${message} (${detail})`);
  }
}

/**
 * A batch handler's answer names a job it was not given, leaves out one it
 * was given, or is not an outcome: the jobs it concerns fail (and retry), as
 * if the handler had thrown.
 */
export class InvalidBatchOutcomeError extends Error {
  override readonly name = 'InvalidBatchOutcomeError';
  constructor(type: string, problem: string) {
    super(`batch job type "${type}": ${problem}`);
  }
}

/**
 * A durable step's fn failed. With the step's own attempts (`maxAttempts`
 * above 1) spent, the job fails for good; otherwise the job's attempt fails
 * and retries by the job's rules. Either way lastError names the step.
 */
export class StepFailedError extends Error {
  override readonly name = 'StepFailedError';
  constructor(
    readonly step: string,
    cause: unknown,
    /** The step's own attempts are spent: the job fails for good. */
    readonly forGood: boolean,
  ) {
    super(`step "${step}" failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** A step used wrongly (a name used twice, a result that is not JSON, a bad duration): the job fails for good. */
export class InvalidStepError extends PermanentError {
  override readonly name = 'InvalidStepError';
  constructor(
    readonly step: string,
    problem: string,
  ) {
    super(`step "${step}": ${problem}`);
  }
}
