import type { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { checkBatch, type EnqueueResult } from '../engine/enqueue.js';
import { enqueueBatchWithApiKey } from '../engine/enqueue-with-api-key.js';
import { enqueueBatch, inEnqueueSpan, type EnqueueInput, type TraceContext } from '../engine/index.js';
import { typeInput } from '../engine/job-type.js';
import type { PresentedApiKey } from './auth/presented-api-key.js';
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
  caller: KeyHolder | PresentedApiKey,
  request: EnqueueRequest,
): Promise<EnqueueAnswer[]> {
  if (caller.kind === 'presented-api-key') {
    const checked = await enqueueCheckingKey(c, deps, caller, request);
    if (checked?.results !== undefined) return answers(c, deps, checked.holder, checked.results);
    // The key's holder decides, as on every route: its checks run again with it and refuse as they always did.
    return enqueueJobs(c, deps, checked?.holder ?? (await caller.lookUp()), request);
  }
  const inputs = await checkedInputs(c, deps, caller, request);
  // Dedup keys (and so Idempotency-Keys) are per queue and tenant: a match is always the caller's own tenant's job.
  const results = await inEnqueueSpan(deps.tracing, spanOf(request, inputs), (traceContext) =>
    enqueueBatch(deps.database(c.env), withTraceContext(inputs, traceContext)),
  );
  return answers(c, deps, caller, results);
}

/** The jobs of the request, checked, for `holder`, or for a key yet to be checked (undefined) with the tenants they name. */
async function checkedInputs(
  c: Context<AppEnv>,
  deps: AppDeps,
  holder: KeyHolder | undefined,
  request: EnqueueRequest,
): Promise<EnqueueInput[]> {
  const given = request.jobs.map((job, index) => toEnqueueInput(holder, request, job, index));
  checkCallbacks(c, deps, request, given);
  return applyJobTypes(c, deps, request, given);
}

/**
 * Enqueues with a presented key in one statement that checks the key too
 * (enqueueBatchWithApiKey), when the request's checks come out the same
 * whatever the key's tenant: every job names its tenant, which the statement
 * holds a bound key to, or none does and none has a callback, whose
 * destination rules are the tenant's. Undefined when it cannot (nothing
 * is enqueued then, and the key is not yet settled), or when a check refuses
 * the jobs: the caller looks the key up first, so a bad key is refused before
 * its body, as on every route. Results undefined when the statement
 * refused the key's tenant: the caller's checks with the holder say why.
 */
async function enqueueCheckingKey(
  c: Context<AppEnv>,
  deps: AppDeps,
  key: PresentedApiKey,
  request: EnqueueRequest,
): Promise<{ holder: KeyHolder; results: EnqueueResult[] | undefined } | undefined> {
  if (!checksIgnoreKeyTenant(request.jobs)) return undefined;
  let inputs: EnqueueInput[];
  try {
    inputs = await checkedInputs(c, deps, undefined, request);
    checkBatch(inputs);
  } catch {
    return undefined;
  }
  const { apiKey, results } = await inEnqueueSpan(deps.tracing, spanOf(request, inputs), (traceContext) =>
    enqueueBatchWithApiKey(deps.database(c.env), key, withTraceContext(inputs, traceContext)),
  );
  return { holder: await key.settle(apiKey), results };
}

/** Whether a request's checks before its statement come out the same whatever tenant the key is bound to. */
function checksIgnoreKeyTenant(jobs: readonly EnqueueBody[]): boolean {
  if (jobs.every((job) => job.tenant !== undefined)) return true;
  return jobs.every(
    (job) => job.tenant === undefined && job.callbackUrl === undefined && job.failureCallbackUrl === undefined,
  );
}

function spanOf(request: EnqueueRequest, inputs: readonly EnqueueInput[]) {
  return { queue: request.queue, jobs: inputs.length, parent: request.traceContext };
}

function withTraceContext(inputs: EnqueueInput[], traceContext: TraceContext | undefined): EnqueueInput[] {
  return traceContext === undefined ? inputs : inputs.map((input) => ({ ...input, ...traceContext }));
}

/** The answers to the jobs of a request: calls the fast-path hook when a job was created. */
async function answers(
  c: Context<AppEnv>,
  deps: AppDeps,
  holder: KeyHolder,
  results: readonly EnqueueResult[],
): Promise<EnqueueAnswer[]> {
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

/** A job of the request as the engine takes it; for a key yet to be checked (no holder), with the tenant it names if any. */
function toEnqueueInput(
  holder: KeyHolder | undefined,
  request: EnqueueRequest,
  job: EnqueueBody,
  index: number,
): EnqueueInput {
  const bound = holder?.tenant ?? null;
  if (bound !== null && job.tenant !== undefined && job.tenant !== bound) {
    throw forbidden(`this key enqueues only for tenant ${bound}`, [
      { path: fieldPath(request, index, 'tenant'), message: `must be ${bound} (or left out) with this key` },
    ]);
  }
  const tenant = holder === undefined ? job.tenant : (bound ?? job.tenant ?? 'default');
  const input: EnqueueInput = { ...job, queue: request.queue, ...(tenant === undefined ? {} : { tenant }) };
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
