import { z } from 'zod';
import { defineJob, type JobContext, type JobDefinition } from '../define-job.js';
import { PermanentError } from '../job-errors.js';
import { isFramingHeader } from './framing-headers.js';
import { destinationProblem, parseAllowedHosts } from './http-destination.js';
import { failedDelivery, sendAndRead } from './http-response.js';
import { WEBHOOK_HEADERS, webhookHeaders } from './http-signature.js';
import { setTraceHeaders } from './trace-headers.js';

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

const httpPayload = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
    headers: z
      .record(z.string(), z.string())
      .superRefine((headers, context) => {
        for (const name of Object.keys(headers).filter(isFramingHeader)) {
          context.addIssue({
            code: 'custom',
            path: [name],
            message: 'the delivery sets this header itself: leave it out',
          });
        }
      })
      .default({}),
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
  return defineJob(
    'http',
    httpPayload,
    async (request, context) => {
      const send = settings.fetch ?? contextFetch(context);
      const url = new URL(request.url);
      const tenant = context.job.tenant;
      const refused = destinationProblem(url, tenant, allowedHosts);
      if (refused !== undefined) throw new PermanentError(refused);

      const body =
        request.body === undefined || typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
      const headers = new Headers(request.headers);
      if (body !== undefined && typeof request.body !== 'string' && !headers.has('content-type')) {
        headers.set('content-type', 'application/json');
      }
      headers.set('skiplock-job-id', context.job.id);
      headers.set('skiplock-tenant', encodeURIComponent(tenant));
      headers.set('skiplock-attempt', String(context.attempt));
      // The attempt's span, when the drain traces: a completion callback's is in the trace of the job it announces.
      setTraceHeaders(headers, context.traceContext);
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

      const { response, text } = await sendAndRead(
        url,
        { timeoutMs: request.timeoutMs, attempt: context.signal, maxBytes: RESULT_BODY_BYTES },
        (signal) => send(url, { method: request.method, headers, body, signal }),
      );
      const { status } = response;
      if (status >= 200 && status < 300) return { status, body: text };
      throw failedDelivery(url, response, text);
      // One delivery, never redirected: one subrequest.
    },
    { subrequests: 1 },
  );
}
