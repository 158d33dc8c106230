/** Base class of the errors the engine raises on purpose (not database failures). */
export class EngineError extends Error {
  override readonly name: string = 'EngineError';
}

/**
 * The lease token no longer owns the job: its lease expired and another worker
 * claimed it, or the job already finished. Nothing was changed.
 */
export class StaleLeaseError extends EngineError {
  override readonly name = 'StaleLeaseError';
  constructor(readonly jobIds: readonly string[]) {
    super(`stale lease: job ${jobIds.join(', ')} is no longer held by this lease token`);
  }
}

/** Input the engine refuses before it reaches the database. */
export class InvalidInputError extends EngineError {
  override readonly name = 'InvalidInputError';
  constructor(
    message: string,
    /** Dotted path of the offending field, e.g. `jobs.3.dedupKey`. */
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * A job holds the enqueue's dedup key and the enqueue's rule will not pass it:
 * `dedupOnConflict: 'refuse'`, or `replace` of a job that has started (or
 * ended). Nothing was stored.
 */
export class DedupConflictError extends EngineError {
  override readonly name = 'DedupConflictError';
  constructor(
    /** The job that holds the key. */
    readonly jobId: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The constraints an illegal change of a job's state violates (the schema's
 * transition trigger and the history's final outcomes): a job changed state
 * under the caller, which can try again with what it now reads.
 */
export const STATE_TRANSITION_CONSTRAINTS: readonly string[] = ['jobs_legal_transition', 'finished_jobs_state_final'];
