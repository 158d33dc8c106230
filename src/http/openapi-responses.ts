import { createRoute, type RouteConfig, type z } from '@hono/zod-openapi';
import { access, type AccessRule } from './auth/access.js';
import type { AppDeps } from './context.js';
import type { ApiTag } from './openapi-tags.js';
import { PROBLEM_CONTENT_TYPE } from './problem.js';
import { ProblemSchema } from './schemas/problem.js';

/** A JSON response of the OpenAPI document. */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

/** A JSON request body; required, so a missing body is a validation error. */
export function jsonBody<T extends z.ZodType>(schema: T) {
  return { required: true, content: { 'application/json': { schema } } };
}

const PROBLEM_DESCRIPTIONS = {
  400: 'Invalid request: the failing fields are in `errors`',
  401: 'No API key or status token, or one that is not valid',
  403: 'The key lacks the scope this route needs',
  404: 'No such job (or one this key may not see)',
  409: 'Conflict with the state of the job',
  413: 'The body, or a JSON value in it, is too large',
  422: "The payload does not fit its job type's schema: the failing fields are in `errors`",
  429: 'Too many failed authentications from this client, or too many watchers of this job: retry after Retry-After seconds',
  503: 'The database is unreachable; retry after Retry-After seconds',
} as const;
type ProblemStatus = keyof typeof PROBLEM_DESCRIPTIONS;

interface ProblemResponse {
  description: string;
  content: { 'application/problem+json': { schema: typeof ProblemSchema } };
}

/** The problem responses a route can give, for the document. */
export function problemResponses<const S extends readonly ProblemStatus[]>(
  ...statuses: S
): Record<S[number], ProblemResponse> {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: PROBLEM_DESCRIPTIONS[status], content: { [PROBLEM_CONTENT_TYPE]: { schema: ProblemSchema } } },
    ]),
  ) as Record<S[number], ProblemResponse>;
}

/** Routes that take `Authorization: Bearer <key>`. */
export const BEARER_SECURITY = [{ bearer: [] }];

/** Routes open to anyone that tell a key holder more: an empty requirement, or the bearer key. */
export const OPTIONAL_BEARER_SECURITY = [{}, ...BEARER_SECURITY];

/**
 * What every operation of the document carries, so that SDK generators name
 * their methods (`enqueueJob`, `claimJobs`) and group them, and never invent
 * names from paths.
 */
export interface NamedOperation {
  operationId: string;
  tags: [ApiTag];
}

/**
 * A route that needs a key (or a status token, when the rule allows it): the
 * document's bearer security and the `access` check come together, so no
 * route can declare the one and forget the other.
 */
export function authorizedRoute<
  const Path extends string,
  Config extends Omit<RouteConfig, 'path' | 'security' | 'middleware'> & NamedOperation & { path: Path },
>(deps: AppDeps, rule: AccessRule, config: Config) {
  // Every such route may turn away a client with too many failed authentications.
  const responses = { ...problemResponses(429), ...config.responses };
  return createRoute({ ...config, responses, security: BEARER_SECURITY, middleware: access(deps, rule) });
}
