import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** One failing input field: a dotted path inside its part of the request (`jobs.3.priority`, `limit`). */
export interface FieldError {
  path: string;
  message: string;
}

/** An RFC 9457 problem document, as every error response carries it. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldError[];
  /** The `x-request-id` of the response, to find its log line. */
  requestId: string;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const PROBLEM_TYPE_BASE = 'https://skiplock.dev/problems/';

/**
 * An error that is the answer: handlers and middleware throw it and the app's
 * error handler renders it, so a handler's own return type stays its success.
 */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  constructor(
    readonly status: ContentfulStatusCode,
    /** Last segment of the problem `type` URI, e.g. `stale-lease`. */
    readonly kind: string,
    readonly title: string,
    detail: string,
    readonly extra: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
  }
}

/** Invalid input; `errors` names the fields when they are known (Postgres refusing a value does not say which). */
export function validationProblem(detail: string, errors?: FieldError[]): ProblemError {
  return new ProblemError(400, 'validation-failed', 'Invalid request', detail, errors ? { errors } : {});
}

/** A payload that the job type this Worker knows refuses: nothing was stored. */
export function invalidPayload(detail: string, errors: FieldError[]): ProblemError {
  return new ProblemError(422, 'invalid-payload', 'Invalid payload', detail, { errors });
}

export function unauthorized(detail: string): ProblemError {
  return new ProblemError(401, 'unauthorized', 'Unauthorized', detail, { headers: { 'www-authenticate': 'Bearer' } });
}

export function forbidden(detail: string, errors?: FieldError[]): ProblemError {
  return new ProblemError(403, 'forbidden', 'Forbidden', detail, errors ? { errors } : {});
}

export function notFound(detail: string): ProblemError {
  return new ProblemError(404, 'not-found', 'Not found', detail);
}

/** Also the answer for a job the caller may not see, so ids do not leak. */
export function jobNotFound(): ProblemError {
  return notFound('no job with this id, or none this caller may see');
}

/** The database answers but holds none of skiplock's tables: a deploy that skipped the migrations. */
export function schemaMissingProblem(): ProblemError {
  const detail = "the database is missing skiplock's schema: run `npx skiplock migrate` against it";
  return new ProblemError(503, 'schema-missing', 'Schema missing', detail);
}

/** 429: come back after `retryAfterSeconds`. */
export function tooManyRequests(kind: string, title: string, detail: string, retryAfterSeconds: number): ProblemError {
  return new ProblemError(429, kind, title, detail, { headers: { 'retry-after': String(retryAfterSeconds) } });
}

export function conflict(kind: string, title: string, detail: string, errors?: FieldError[]): ProblemError {
  return new ProblemError(409, kind, title, detail, errors ? { errors } : {});
}

export function renderProblem(c: Context, problem: ProblemError, requestId: string): Response {
  return c.json(problemDocument(problem, requestId), problem.status, {
    ...problem.extra.headers,
    'content-type': PROBLEM_CONTENT_TYPE,
  });
}

/** The same answer without a request context: for a host that refuses before the app runs. */
export function problemResponse(problem: ProblemError, requestId: string): Response {
  return Response.json(problemDocument(problem, requestId), {
    status: problem.status,
    headers: { ...problem.extra.headers, 'content-type': PROBLEM_CONTENT_TYPE },
  });
}

function problemDocument(problem: ProblemError, requestId: string): ProblemDocument {
  return {
    type: PROBLEM_TYPE_BASE + problem.kind,
    title: problem.title,
    status: problem.status,
    detail: problem.message,
    ...(problem.extra.errors ? { errors: problem.extra.errors } : {}),
    requestId,
  };
}
