import { HTTPException } from 'hono/http-exception';
import { DatabaseError } from '../db/errors.js';
import {
  DedupConflictError,
  InvalidInputError,
  STATE_TRANSITION_CONSTRAINTS,
  StaleLeaseError,
} from '../engine/errors.js';
import { conflict, ProblemError, validationProblem } from './problem.js';

/** Seconds a client should wait before retrying when the database is unreachable. */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * The problem that answers an error thrown while handling a request, or
 * undefined when the error is unexpected (a bug: logged, answered 500).
 */
export function problemFor(error: unknown): ProblemError | undefined {
  if (error instanceof ProblemError) return error;
  if (error instanceof HTTPException) return fromHttpException(error);
  if (error instanceof StaleLeaseError) {
    const detail = 'the lease token no longer holds this job: its lease was taken over or the job finished';
    return conflict('stale-lease', 'Stale lease', detail);
  }
  if (error instanceof DedupConflictError) {
    return conflict('dedup-conflict', 'Dedup key held', error.message, [
      { path: 'dedupKey', message: `held by job ${error.jobId}` },
    ]);
  }
  if (error instanceof InvalidInputError) {
    const errors = error.field === undefined ? undefined : [{ path: error.field, message: error.message }];
    return validationProblem(error.message, errors);
  }
  if (error instanceof DatabaseError) return fromDatabaseError(error);
  return undefined;
}

/** Hono's own refusals: malformed JSON (400) and a body that is not JSON (415). */
function fromHttpException(error: HTTPException): ProblemError | undefined {
  switch (error.status) {
    case 400:
      return new ProblemError(
        400,
        'malformed-request',
        'Malformed request',
        error.message || 'the request could not be read',
      );
    case 415:
      return new ProblemError(
        415,
        'unsupported-media-type',
        'Unsupported media type',
        'send the body as application/json',
      );
    default:
      return undefined;
  }
}

/**
 * Postgres refusing a value is the client's fault (400); the database being
 * out of reach is not (503, retry later). Anything else is a bug. The
 * database's own message never reaches the client (it names tables,
 * constraints and types): the app logs it under the request id instead.
 */
function fromDatabaseError(error: DatabaseError): ProblemError | undefined {
  if (error.unavailable) {
    const detail = `the database cannot be reached right now; retry in ${UNAVAILABLE_RETRY_AFTER_SECONDS} s`;
    return new ProblemError(503, 'database-unavailable', 'Database unavailable', detail, {
      headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
    });
  }
  const code = error.code ?? '';
  // The transition trigger: the job changed state under the request.
  if (code === '23514' && error.constraint !== undefined && STATE_TRANSITION_CONSTRAINTS.includes(error.constraint)) {
    return conflict('state-conflict', 'State conflict', 'the job changed state while this request ran: read it again');
  }
  // 22xxx data exceptions (bad dates, out-of-range numbers, invalid JSON text),
  // 23502/23514 null and check violations, 54xxx program limits (a key too large to index).
  if (code.startsWith('22') || code === '23502' || code === '23514' || code.startsWith('54')) {
    return validationProblem('a value in the request is outside what the database accepts');
  }
  if (code === '23505') return conflict('conflict', 'Conflict', 'the request conflicts with a row that already exists');
  return undefined;
}
