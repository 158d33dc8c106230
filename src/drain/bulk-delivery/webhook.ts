import { z } from 'zod';
import { defineBatchJob, type BatchJobOptions, type BatchOutcome } from '../define-batch-job.js';
import type { JobDefinition } from '../define-job.js';
import { PermanentFailure, RetryAfter } from '../job-errors.js';
import { WEBHOOK_HEADERS, endpointSecretKey, signedHeaders } from '../handlers/http-signature.js';
import { failedDelivery, sendAndRead } from '../handlers/http-response.js';
import type { DeliveryFetch } from '../handlers/http.js';
import { deliveredJobs } from './delivered-job.js';

export interface WebhookDeliveryOptions extends BatchJobOptions<WebhookDeliveryResult> {
  /** Where each batch is POSTed: http or https, set in code (not taken from payloads). */
  url: string | URL;
  /** The receiver's Standard Webhooks secret (`whsec_…`): every POST is signed with it. */
  secret?: string;
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

/**
 * Defines a job type whose jobs are delivered in batches to one webhook: a
 * single signed POST of up to `batchSize` jobs (default 100), in enqueue
 * order, as a Standard Webhooks event
 * `{"type": "skiplock.jobs", "timestamp", "data": {"jobs": [DeliveredJob, ...]}}`.
 * A 2xx accepts every job but those its body rejects (`{"rejected": [{"id",
 * "error", "retryAfterSeconds", "permanent"}]}`), and the accepted complete
 * together; any other answer, a timeout or a network error fails the whole
 * batch as the `http` job would (Retry-After honoured, a 4xx other than 408
 * and 429 for good, the rest retried with backoff). A job is delivered at
 * least once: a drain that dies after the POST and before the completions
 * commit delivers it again once its lease lapses, with the same `id`.
 */
export function defineWebhookDelivery<const Type extends string, Schema extends z.ZodType>(
  type: Type,
  schema: Schema,
  options: WebhookDeliveryOptions,
): JobDefinition<Type, z.input<Schema>, WebhookDeliveryResult> {
  const { url: target, secret, headers: extraHeaders = {}, timeoutMs = 10_000, fetch: send, ...batchOptions } = options;
  const url = new URL(target);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new RangeError(`job type "${type}": url must be http or https`);
  const key = secret === undefined ? undefined : endpointSecretKey(secret);
  if (!(Number.isInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= 300_000)) {
    throw new RangeError(`job type "${type}": timeoutMs must be a whole number from 1 to 300000`);
  }
  const signedNames = new Set<string>(WEBHOOK_HEADERS);

  return defineBatchJob(
    type,
    schema,
    async (items, context) => {
      const jobs = deliveredJobs(items);
      const batch = await batchId(jobs.map((job) => job.id));
      const unixSeconds = Math.floor(Date.now() / 1000);
      const body = JSON.stringify({ type: 'skiplock.jobs', timestamp: new Date(unixSeconds * 1000).toISOString(), data: { jobs } });
      const headers = new Headers(Object.entries(extraHeaders).filter(([name]) => !signedNames.has(name.toLowerCase())));
      headers.set('content-type', 'application/json');
      if (key !== undefined) {
        for (const [name, value] of Object.entries(await signedHeaders(key, { id: batch, unixSeconds, body }))) headers.set(name, value);
      }
      const { response, text } = await sendAndRead(url, { timeoutMs, attempt: context.signal, maxBytes: ANSWER_BYTES }, (signal) =>
        send === undefined
          ? context.fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal })
          : send(url, { method: 'POST', headers, body, signal }),
      );
      if (response.status < 200 || response.status >= 300) throw failedDelivery(url, response, text);

      const rejected = rejections(url, text, new Set(jobs.map((job) => job.id)));
      const delivered: WebhookDeliveryResult = { status: response.status, batch, size: jobs.length };
      const outcomes = new Map<string, BatchOutcome<WebhookDeliveryResult>>();
      for (const job of jobs) outcomes.set(job.id, rejected.get(job.id) ?? { result: delivered });
      return outcomes;
    },
    // One POST per batch, never redirected.
    { ...batchOptions, subrequests: batchOptions.subrequests ?? 1 },
  );
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
  if (!answer.success) throw new Error(`${url.origin} answered 2xx with a "rejected" list that is not [{ id, error? }]`);
  const strangers = answer.data.rejected.filter((entry) => !sent.has(entry.id)).map((entry) => entry.id);
  if (strangers.length > 0) throw new Error(`${url.origin} rejected jobs it was not sent: ${strangers.slice(0, 5).join(', ')}`);
  for (const entry of answer.data.rejected) {
    const reason = `${url.origin} rejected the job${entry.error === undefined ? '' : `: ${entry.error}`}`;
    const error = entry.permanent
      ? new PermanentFailure(reason)
      : entry.retryAfterSeconds !== undefined
        ? new RetryAfter(entry.retryAfterSeconds, reason)
        : new Error(reason);
    outcomes.set(entry.id, { error });
  }
  return outcomes;
}

/** The batch's `webhook-id`: the same for the same jobs, so a receiver sees a resent batch as a repeat. */
async function batchId(ids: readonly string[]): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(ids.join(',')));
  return 'batch_' + [...new Uint8Array(digest).subarray(0, 16)].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}
