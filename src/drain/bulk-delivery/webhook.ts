import { z } from 'zod';
import {
  defineBatchJob,
  type BatchContext,
  type BatchItem,
  type BatchJobOptions,
  type BatchOutcome,
} from '../define-batch-job.js';
import type { JobDefinition } from '../define-job.js';
import { PermanentError, RetryAfterError } from '../job-errors.js';
import { WEBHOOK_HEADERS, endpointKey, endpointSecretKey, signedHeaders } from '../handlers/http-signature.js';
import { failedDelivery, sendAndRead } from '../handlers/http-response.js';
import type { DeliveryFetch } from '../handlers/http.js';
import { setTraceHeaders } from '../handlers/trace-headers.js';
import type { Tracing } from '../../engine/tracing.js';
import { deliveredJobs, type DeliveredJob } from './delivered-job.js';
import { inDeliverySpan, tracingOf } from './delivery-span.js';

export interface WebhookDeliveryOptions extends BatchJobOptions<WebhookDeliveryResult> {
  /** Where each batch is POSTed: http or https, set in code (not taken from payloads). */
  url: string | URL;
  /** The receiver's Standard Webhooks secret (`whsec_…`): every POST is signed with it. */
  secret?: string;
  /**
   * Instead of `secret`: a signing secret from which each tenant's POSTs get
   * an endpoint secret of their own, bound to the tenant and to `url`'s
   * origin and path (`httpEndpointSecret(signingSecret, { tenant, url })`
   * gives a receiver its `whsec_…`), as the `http` job's deliveries are.
   */
  signingSecret?: string;
  /**
   * The most bytes of jobs one POST carries, 1,024 to 10,485,760; default
   * 1,048,576. A batch over it goes in several POSTs; a job larger alone
   * goes alone.
   */
  maxBatchBytes?: number;
  /** Extra request headers (an API key of the receiver's, say). */
  headers?: Readonly<Record<string, string>>;
  /** How long the receiver may take to answer; default 10,000 ms. */
  timeoutMs?: number;
  /** Sends the POSTs; the batch's `ctx.fetch` (counted, as every job's) when left out. */
  fetch?: DeliveryFetch;
}

/** A delivered job's result: the receiver's status and the batch it went in. */
export interface WebhookDeliveryResult {
  status: number;
  /** The POST's `webhook-id`. */
  batch: string;
  size: number;
}

/**
 * What a receiver may answer with a 2xx to turn some of the batch away: each
 * job named here fails its attempt (retried with backoff, after
 * `retryAfterSeconds` when given, or never again when `permanent`); every
 * other job of the batch was accepted.
 */
const receiverAnswer = z.object({
  rejected: z
    .array(
      z.object({
        id: z.string(),
        error: z.string().max(2000).optional(),
        retryAfterSeconds: z.number().min(0).max(86_400).optional(),
        permanent: z.boolean().optional(),
      }),
    )
    .default([]),
});

/** How much of the receiver's answer is read: a rejection list for a batch of 1,000. */
const ANSWER_BYTES = 256 * 1024;

const DEFAULT_MAX_BATCH_BYTES = 1024 * 1024;

/**
 * A receiver turned away a whole POST of several jobs with a 4xx that is not
 * 408 or 429: a refusal that may be any one job's fault (a 413, a 422 on one
 * entry). Each job retries with backoff, and its next delivery goes in a POST
 * of its own, where such an answer fails it for good.
 */
export class BatchRefusedError extends Error {
  override readonly name = 'BatchRefusedError';
}

const encoder = new TextEncoder();

/**
 * Defines a job type whose jobs are delivered in batches to one webhook: a
 * signed POST of up to `batchSize` jobs (default 100) of one tenant, in
 * enqueue order, as a Standard Webhooks event
 * `{"type": "skiplock.jobs", "timestamp", "data": {"jobs": [DeliveredJob, ...]}}`
 * with a `skiplock-tenant` header. Jobs of several tenants that start
 * together go in a POST per tenant, and a POST keeps under `maxBatchBytes`,
 * so one tenant's jobs never fail, delay or show in another's. A 2xx accepts
 * every job but those its body rejects (`{"rejected": [{"id", "error",
 * "retryAfterSeconds", "permanent"}]}`), and the accepted complete together;
 * any other answer, a timeout or a network error fails the POST's jobs as
 * the `http` job would (Retry-After honoured, the rest retried with backoff),
 * except that a 4xx other than 408 and 429 fails for good only a job sent
 * alone: a POST of several retries each job in a POST of its own
 * (BatchRefusedError). A job is delivered at least once: a drain that dies
 * after the POST and before the completions commit delivers it again once
 * its lease lapses, with the same `id`.
 */
export function defineWebhookDelivery<const Type extends string, Schema extends z.ZodType>(
  type: Type,
  schema: Schema,
  options: WebhookDeliveryOptions,
): JobDefinition<Type, z.input<Schema>, WebhookDeliveryResult> {
  const {
    url: target,
    secret,
    signingSecret,
    maxBatchBytes = DEFAULT_MAX_BATCH_BYTES,
    headers: extraHeaders = {},
    timeoutMs = 10_000,
    fetch: send,
    ...batchOptions
  } = options;
  const url = new URL(target);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new RangeError(`job type "${type}": url must be http or https`);
  if (secret !== undefined && signingSecret !== undefined)
    throw new RangeError(`job type "${type}": give secret or signingSecret, not both`);
  const fixedKey = secret === undefined ? undefined : endpointSecretKey(secret);
  if (!(Number.isInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= 300_000)) {
    throw new RangeError(`job type "${type}": timeoutMs must be a whole number from 1 to 300000`);
  }
  if (!(Number.isInteger(maxBatchBytes) && maxBatchBytes >= 1024 && maxBatchBytes <= 10 * 1024 * 1024)) {
    throw new RangeError(`job type "${type}": maxBatchBytes must be a whole number from 1024 to 10485760`);
  }
  const signedNames = new Set<string>(WEBHOOK_HEADERS);
  const keyFor = async (tenant: string) =>
    signingSecret === undefined ? fixedKey : endpointKey(signingSecret, tenant, url);

  /** POSTs one tenant's jobs and says how each ended. */
  async function post(
    jobs: DeliveredJob[],
    context: BatchContext,
    tracing: Tracing | undefined,
  ): Promise<Array<[string, BatchOutcome<WebhookDeliveryResult>]>> {
    const tenant = jobs[0]!.tenant;
    const batch = await batchId(jobs.map((job) => job.id));
    const unixSeconds = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({
      type: 'skiplock.jobs',
      timestamp: new Date(unixSeconds * 1000).toISOString(),
      data: { jobs },
    });
    const headers = new Headers(Object.entries(extraHeaders).filter(([name]) => !signedNames.has(name.toLowerCase())));
    headers.set('content-type', 'application/json');
    headers.set('skiplock-tenant', encodeURIComponent(tenant));
    const key = await keyFor(tenant);
    if (key !== undefined) {
      for (const [name, value] of Object.entries(await signedHeaders(key, { id: batch, unixSeconds, body })))
        headers.set(name, value);
    }
    let outcomes: Map<string, BatchOutcome<WebhookDeliveryResult>>;
    try {
      const delivery = { jobs, target: 'webhook', attributes: { 'server.address': url.hostname } } as const;
      const { response, text } = await inDeliverySpan(tracing, delivery, async (traceContext) => {
        setTraceHeaders(headers, traceContext);
        const answer = await sendAndRead(
          url,
          { timeoutMs, attempt: context.signal, maxBytes: ANSWER_BYTES },
          (signal) =>
            send === undefined
              ? context.fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal })
              : send(url, { method: 'POST', headers, body, signal }),
        );
        const { response } = answer;
        if (response.status < 200 || response.status >= 300) throw refusal(url, response, answer.text, jobs.length);
        return answer;
      });
      const rejected = rejections(url, text, new Set(jobs.map((job) => job.id)));
      const delivered: WebhookDeliveryResult = { status: response.status, batch, size: jobs.length };
      outcomes = new Map(jobs.map((job) => [job.id, rejected.get(job.id) ?? { result: delivered }]));
    } catch (error) {
      outcomes = new Map(jobs.map((job) => [job.id, { error }]));
    }
    return [...outcomes];
  }

  return defineBatchJob(
    type,
    schema,
    async (items, context) => {
      const posts = postsOf(
        deliveredJobs(items),
        new Set(items.filter(refusedWithBatch).map((item) => item.id)),
        maxBatchBytes,
      );
      const tracing = tracingOf(items);
      return new Map((await Promise.all(posts.map((jobs) => post(jobs, context, tracing)))).flat());
    },
    // At most one POST per job, never redirected.
    { ...batchOptions, subrequests: batchOptions.subrequests ?? 1 },
  );
}

/**
 * The POSTs a batch goes in: one tenant's jobs each, in enqueue order, each
 * under `maxBytes` of jobs (a job larger alone goes alone), and a job whose
 * last delivery was in a refused POST of several alone.
 */
function postsOf(jobs: readonly DeliveredJob[], alone: ReadonlySet<string>, maxBytes: number): DeliveredJob[][] {
  const posts: DeliveredJob[][] = [];
  const open = new Map<string, { jobs: DeliveredJob[]; bytes: number }>();
  for (const job of jobs) {
    if (alone.has(job.id)) {
      posts.push([job]);
      continue;
    }
    const bytes = encoder.encode(JSON.stringify(job)).byteLength;
    let current = open.get(job.tenant);
    if (current !== undefined && current.bytes + bytes > maxBytes) current = undefined;
    if (current === undefined) {
      current = { jobs: [], bytes: 0 };
      open.set(job.tenant, current);
      posts.push(current.jobs);
    }
    current.jobs.push(job);
    current.bytes += bytes;
  }
  return posts;
}

/** Whether the job's last attempt ended in a refusal of a POST of several (see BatchRefusedError). */
function refusedWithBatch(item: BatchItem<unknown>): boolean {
  const lastError = item.context.job.lastError;
  return (
    typeof lastError === 'object' &&
    lastError !== null &&
    !Array.isArray(lastError) &&
    lastError.name === 'BatchRefusedError'
  );
}

/** The error a POST that was not answered 2xx fails its jobs with. */
function refusal(url: URL, response: Response, text: string, size: number): Error {
  const failure = failedDelivery(url, response, text);
  return size > 1 && failure instanceof PermanentError
    ? new BatchRefusedError(`${failure.message} (a POST of ${size} jobs: each retries alone)`)
    : failure;
}

/** The jobs the receiver turned away, as outcomes; an answer naming jobs it was not sent fails the batch. */
function rejections(url: URL, text: string, sent: ReadonlySet<string>): Map<string, BatchOutcome<never>> {
  const outcomes = new Map<string, BatchOutcome<never>>();
  if (text.trim() === '') return outcomes;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // A 2xx with a body that is not JSON accepts everything.
    return outcomes;
  }
  const answer = receiverAnswer.safeParse(json);
  if (!answer.success)
    throw new Error(`${url.origin} answered 2xx with a "rejected" list that is not [{ id, error? }]`);
  const strangers = answer.data.rejected.filter((entry) => !sent.has(entry.id)).map((entry) => entry.id);
  if (strangers.length > 0)
    throw new Error(`${url.origin} rejected jobs it was not sent: ${strangers.slice(0, 5).join(', ')}`);
  for (const entry of answer.data.rejected) {
    const reason = `${url.origin} rejected the job${entry.error === undefined ? '' : `: ${entry.error}`}`;
    const error = entry.permanent
      ? new PermanentError(reason)
      : entry.retryAfterSeconds !== undefined
        ? new RetryAfterError(entry.retryAfterSeconds, reason)
        : new Error(reason);
    outcomes.set(entry.id, { error });
  }
  return outcomes;
}

/** The batch's `webhook-id`: the same for the same jobs, so a receiver sees a resent batch as a repeat. */
async function batchId(ids: readonly string[]): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(ids.join(',')));
  return `batch_${[...new Uint8Array(digest).subarray(0, 16)].map((byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}
