import type { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { enqueueBatch, inEnqueueSpan, type EnqueueInput, type TraceContext } from '../engine/index.js';
import { typeInput } from '../engine/job-type.js';
import { hasScope, type KeyHolder } from './auth/principal.js';
import type { AppDeps, AppEnv } from './context.js';
import { forbidden, invalidPayload, validationProblem, type FieldError } from './problem.js';
import { IDEMPOTENCY_DEDUP_PREFIX, type EnqueueBody } from './schemas/enqueue.js';
import type { EnqueueAnswerSchema } from './schemas/job.js';
import { statusUrlMaker } from './status-url.js';

/** A job as an enqueue answers it: the whole job, or for a dedup hit without the `read` scope its reference. */
export type EnqueueAnswer = z.output<typeof EnqueueAnswerSchema>;

/** How long a retried request with the same Idempotency-Key gets the first request's job back. */
const IDEMPOTENCY_WINDOW_SECONDS = 24 * 60 * 60;

export interface EnqueueRequest {
  queue: string;
  jobs: readonly EnqueueBody[];
  idempotencyKey: string | undefined;
  /** The request's `traceparent` and `tracestate` headers: the caller's span, which the enqueue's span (or, untraced, the jobs) follows. */
  traceContext: TraceContext | undefined;
  /** The batch route (a body of `{ jobs }`), not the single one. */
  batch: boolean;
}

/** A field's path in problems: `jobs.3.tenant` in a batch, `tenant` for a single job. */
function fieldPath(request: EnqueueRequest, index: number, field: string): string {
  return request.batch ? `jobs.${index}.${field}` : field;
}

/**
 * Enqueues the jobs of one request for a key holder and answers them with
 * their status URLs. Calls the fast-path hook when a job was created.
 */
export async function enqueueJobs(
  c: Context<AppEnv>,
  deps: AppDeps,
  holder: KeyHolder,
  request: EnqueueRequest,
): Promise<EnqueueAnswer[]> {
  const given = request.jobs.map((job, index) => toEnqueueInput(holder, request, job, index));
  checkCallbacks(c, deps, request, given);
  const inputs = await applyJobTypes(c, deps, request, given);
  // Dedup keys (and so Idempotency-Keys) are per queue and tenant: a match is always the caller's own tenant's job.
  const results = await inEnqueueSpan(
    deps.tracing,
    { queue: request.queue, jobs: inputs.length, parent: request.traceContext },
    (traceContext) =>
      enqueueBatch(
        deps.database(c.env),
        traceContext === undefined ? inputs : inputs.map((input) => ({ ...input, ...traceContext })),
      ),
  );
  if (deps.onEnqueued && results.some((result) => !result.deduplicated)) deps.onEnqueued(c.executionCtx, c.env);
  const statusUrl = await statusUrlMaker(c, deps.settings(c.env));
  const mayRead = hasScope(holder, ['read']);
  return Promise.all(
    results.map(async ({ job, deduplicated, debounced, replaced }) =>
      // A dedup hit is a job this request did not make: a key that may not read jobs learns only its id and status.
      deduplicated && !mayRead
        ? { id: job.id, status: job.status, statusUrl: await statusUrl(job.id), deduplicated, debounced, replaced }
        : { ...job, statusUrl: await statusUrl(job.id), deduplicated, debounced, replaced },
    ),
  );
}

/**
 * Jobs of the types the host knows: their payloads are checked against their
 * schemas before anything is stored, and their attempts kept within the
 * type's maxAttempts; other types pass as any JSON (a pull worker in another
 * language may run them).
 */
async function applyJobTypes(
  c: Context<AppEnv>,
  deps: AppDeps,
  request: EnqueueRequest,
  inputs: readonly EnqueueInput[],
): Promise<EnqueueInput[]> {
  const errors: FieldError[] = [];
  const typed: EnqueueInput[] = [];
  for (const [index, input] of inputs.entries()) {
    const jobType = deps.jobType?.(c.env, input.type ?? input.queue);
    if (jobType === undefined) {
      typed.push(input);
      continue;
    }
    const issues = await jobType.checkPayload(input.payload ?? null);
    for (const issue of issues) {
      const field = issue.path === '' ? 'payload' : `payload.${issue.path}`;
      errors.push({ path: fieldPath(request, index, field), message: issue.message });
    }
    // The definition's key functions read a payload that fits its schema.
    typed.push(issues.length === 0 ? typeInput(jobType, input.payload ?? null, input) : input);
  }
  if (errors.length === 0) return typed;
  throw invalidPayload(`the payload does not fit its job type: ${errors[0]!.path}: ${errors[0]!.message}`, errors);
}

/** Callback URLs are held to the `http` job's destination rules at enqueue, not only when the job ends. */
function checkCallbacks(
  c: Context<AppEnv>,
  deps: AppDeps,
  request: EnqueueRequest,
  inputs: readonly EnqueueInput[],
): void {
  const errors: FieldError[] = [];
  for (const [index, input] of inputs.entries()) {
    for (const field of ['callbackUrl', 'failureCallbackUrl'] as const) {
      const url = input[field];
      if (url === undefined) continue;
      const problem =
        deps.callbackProblem === undefined
          ? 'this deployment delivers no callbacks (its built-in http job is off)'
          : deps.callbackProblem(c.env, input.tenant ?? 'default', new URL(url));
      if (problem !== undefined) errors.push({ path: fieldPath(request, index, field), message: problem });
    }
  }
  if (errors.length === 0) return;
  throw validationProblem(`${errors[0]!.path}: ${errors[0]!.message}`, errors);
}

function toEnqueueInput(holder: KeyHolder, request: EnqueueRequest, job: EnqueueBody, index: number): EnqueueInput {
  if (holder.tenant !== null && job.tenant !== undefined && job.tenant !== holder.tenant) {
    throw forbidden(`this key enqueues only for tenant ${holder.tenant}`, [
      { path: fieldPath(request, index, 'tenant'), message: `must be ${holder.tenant} (or left out) with this key` },
    ]);
  }
  const tenant = holder.tenant ?? job.tenant ?? 'default';
  const input: EnqueueInput = { ...job, queue: request.queue, tenant };
  if (request.idempotencyKey === undefined) return input;
  const keyField = job.dedupKey !== undefined ? 'dedupKey' : job.debounceKey !== undefined ? 'debounceKey' : undefined;
  if (keyField !== undefined) {
    throw validationProblem(`give a ${keyField} or an Idempotency-Key header, not both`, [
      { path: fieldPath(request, index, keyField), message: 'must be left out with an Idempotency-Key header' },
    ]);
  }
  return {
    ...input,
    dedupKey: idempotencyDedupKey(request, index),
    dedupWindowSeconds: job.dedupWindowSeconds ?? IDEMPOTENCY_WINDOW_SECONDS,
  };
}

/**
 * The Idempotency-Key maps onto the engine's dedup key (which is per tenant
 * and queue), in a namespace that client dedup keys cannot enter, and per
 * position in a batch (a retried batch gets each of its jobs back). JSON
 * keeps the parts apart whatever characters they hold.
 */
function idempotencyDedupKey(request: EnqueueRequest, index: number): string {
  const parts = request.batch ? [request.idempotencyKey, index] : [request.idempotencyKey];
  return IDEMPOTENCY_DEDUP_PREFIX + JSON.stringify(parts);
}
