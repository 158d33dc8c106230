import { OpenAPIHono, type z } from '@hono/zod-openapi';
import type { ValidationTargets } from 'hono';
import { CachedTrieRouter } from './cached-router.js';
import type { AppEnv } from './context.js';
import { ProblemError, validationProblem, type FieldError } from './problem.js';
import { isTooLargeIssue } from './schemas/common.js';

/** What a path-less issue is about: the whole body, query string, path or headers. */
const TARGET_NAMES: Partial<Record<keyof ValidationTargets, string>> = {
  json: 'body',
  query: 'query',
  param: 'path',
  header: 'headers',
};

function fieldErrors(issue: z.core.$ZodIssue, target: keyof ValidationTargets): FieldError[] {
  const path = issue.path.map(String);
  // One entry per unknown key, so each names the field to remove.
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({ path: [...path, key].join('.'), message: 'is not a field of this request' }));
  }
  return [{ path: path.join('.') || (TARGET_NAMES[target] ?? target), message: issue.message }];
}

/** A request that does not match its route's schemas: 400, or 413 when only a JSON value's size is wrong. */
export function validationFailure(error: z.ZodError, target: keyof ValidationTargets): ProblemError {
  const errors = error.issues.flatMap((issue) => fieldErrors(issue, target));
  if (error.issues.every(isTooLargeIssue)) {
    const detail = 'a JSON value in the request is too large';
    return new ProblemError(413, 'payload-too-large', 'Payload too large', detail, { errors });
  }
  return validationProblem(`the request ${TARGET_NAMES[target] ?? target} is not valid`, errors);
}

/** A router whose routes answer invalid input with a problem (thrown, so the app's error handler renders it). */
export function router(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    router: new CachedTrieRouter(),
    defaultHook: (result) => {
      if (!result.success) throw validationFailure(result.error, result.target);
    },
  });
}
