import { z } from 'zod';
import { defineJob, type JobContext, type JobDefinition } from '../define-job.js';
import { PermanentFailure, RetryAfter } from '../job-errors.js';
import { destinationProblem, parseAllowedHosts } from './http-destination.js';
import { WEBHOOK_HEADERS, webhookHeaders } from './http-signature.js';

/** One delivery as the `http` job sends it. Redirects are never followed: they could leave the allow-list. */
export interface DeliveryRequest {
  method: string;
  headers: Headers;
  body: string | undefined;
  signal: AbortSignal;
}

/**
 * What sends a delivery. On Workers the platform's fetch (through the job's
 * `ctx.fetch`, which counts its connection and subrequest), which cannot reach
 * private addresses from Cloudflare's edge. In Node, the Node worker gives
 * one that resolves the name, refuses it unless every address is public,
 * and connects to the address it checked (`publicAddressFetch` of
 * `skiplock/node-worker`).
 */
export type DeliveryFetch = (url: URL, request: DeliveryRequest) => Promise<Response>;

export interface HttpJobSettings {
  /**
   * HTTP_ALLOWED_HOSTS: `[tenant=]host[:port]` entries; host is a name, `*.example.com`
   * or an IP address; without a tenant an entry is for every tenant's jobs, without a
   * port it allows 443 and 80. Nothing is delivered while it is empty.
   */
  allowedHosts: readonly string[];
  /** HTTP_SIGNING_SECRET: signs every delivery (Standard Webhooks, a secret per endpoint); unsigned without it. */
  signingSecret?: string;
  /** Sends the deliveries; the job's `ctx.fetch` (the platform's, counted) when left out. */
  fetch?: DeliveryFetch;
}

/** A delivery through the attempt's own fetch. */
const contextFetch =
  (context: JobContext): DeliveryFetch =>
  (url, { method, headers, body, signal }) =>
    context.fetch(url, { method, headers, ...(body === undefined ? {} : { body }), redirect: 'manual', signal });

/** How much of the response body the job's result keeps. */
const RESULT_BODY_BYTES = 2048;
/** Longest Retry-After honoured; a longer one is someone's mistake, not a plan. */
const MAX_RETRY_AFTER_SECONDS = 24 * 3600;

const httpPayload = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
    headers: z.record(z.string(), z.string()).default({}),
    /** A string is sent as it is; anything else as JSON. */
    body: z.json().optional(),
    timeoutMs: z.number().int().min(1).max(300_000).default(10_000),
  })
  .refine((request) => request.method !== 'GET' || request.body === undefined, {
    message: 'a GET request has no body',
    path: ['body'],
  });

export type HttpJobPayload = z.input<typeof httpPayload>;

/**
 * The built-in `http` job: delivers its payload to a URL on the allow-list
 * for the job's tenant, signed so the receiver can verify it came from here.
 * 2xx succeeds (result: status and the start of the body); 4xx other than
 * 408 and 429 fails for good; everything else (5xx, 408, 429, 3xx: redirects
 * are not followed, they could leave the allow-list; timeouts and network
 * errors) retries, after Retry-After when a 429 or 503 gives one. Receivers
 * see at-least-once delivery: `webhook-id` (and `skiplock-job-id`) lets them drop repeats.
 */
export function httpJob(settings: HttpJobSettings): JobDefinition {
  const allowedHosts = parseAllowedHosts(settings.allowedHosts);
  return defineJob('http', httpPayload, async (request, context) => {
    const send = settings.fetch ?? contextFetch(context);
    const url = new URL(request.url);
    const tenant = context.job.tenant;
    const refused = destinationProblem(url, tenant, allowedHosts);
    if (refused !== undefined) throw new PermanentFailure(refused);

    const body = request.body === undefined || typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
    const headers = new Headers(request.headers);
    if (body !== undefined && typeof request.body !== 'string' && !headers.has('content-type')) {
      headers.set('content-type', 'application/json');
    }
    headers.set('skiplock-job-id', context.job.id);
    headers.set('skiplock-tenant', encodeURIComponent(tenant));
    headers.set('skiplock-attempt', String(context.attempt));
    // Only this handler signs: a payload cannot bring a signature of its own.
    for (const name of WEBHOOK_HEADERS) headers.delete(name);
    if (settings.signingSecret) {
      const signed = await webhookHeaders(settings.signingSecret, {
        jobId: context.job.id,
        tenant,
        url,
        body: body ?? '',
        unixSeconds: Math.floor(Date.now() / 1000),
      });
      for (const [name, value] of Object.entries(signed)) headers.set(name, value);
    }

    let response: Response;
    try {
      const signal = AbortSignal.any([context.signal, AbortSignal.timeout(request.timeoutMs)]);
      response = await send(url, { method: request.method, headers, body, signal });
    } catch (error) {
      if (error instanceof PermanentFailure) throw error;
      const timedOut = error instanceof Error && error.name === 'TimeoutError';
      throw new Error(
        timedOut
          ? `${url.origin} did not answer within ${request.timeoutMs} ms`
          : `request to ${url.origin} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const text = await readStart(response, RESULT_BODY_BYTES);
    const { status } = response;
    if (status >= 200 && status < 300) return { status, body: text };

    const what = `${url.origin} answered ${status}${text === '' ? '' : `: ${text.slice(0, 200)}`}`;
    const retryAfter = status === 429 || status === 503 ? retryAfterSeconds(response.headers.get('retry-after')) : undefined;
    if (retryAfter !== undefined) throw new RetryAfter(retryAfter, what);
    if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw new PermanentFailure(what);
    throw new Error(what);
    // One delivery, never redirected: one subrequest.
  }, { subrequests: 1 });
}

/** The first `maxBytes` of the body as text; the rest is never downloaded. */
async function readStart(response: Response, maxBytes: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes.subarray(0, maxBytes));
}

/** Retry-After as seconds (`120`) or an HTTP date; undefined when absent or unreadable. */
function retryAfterSeconds(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = /^\d+$/.test(header.trim()) ? Number(header.trim()) : (Date.parse(header) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, seconds)) : undefined;
}
