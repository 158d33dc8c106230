import type { z } from '@hono/zod-openapi';
import { env, exports } from 'cloudflare:workers';
import { expect } from 'vitest';
import type { ApiKeyScope } from '../../../../src/engine/api-keys';
import { skiplockClient, successBody, type SkiplockClient } from '../../../../src/http/client';
import type { ProblemDocument } from '../../../../src/http/problem';
import type { EnqueuedJobSchema } from '../../../../src/http/schemas/job';

export type EnqueuedJob = z.output<typeof EnqueuedJobSchema>;

/** Any origin works: requests go straight to the Worker under test, not over the network. */
export const BASE_URL = 'http://skiplock.test';

export const ADMIN_TOKEN = env.ADMIN_TOKEN!;

/** The Worker's own fetch, as a client's `fetch`. */
export const workerFetch: typeof fetch = (input, init) => exports.default.fetch(new Request(input, init));

/** Raw requests, for what the typed client will not send (bad JSON, stray headers). */
export function request(path: string, init: RequestInit & { apiKey?: string } = {}): Promise<Response> {
  const { apiKey, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (apiKey !== undefined) headers.set('authorization', `Bearer ${apiKey}`);
  return workerFetch(new URL(path, BASE_URL), { ...rest, headers });
}

/** A POST of a JSON body, with the admin key unless another is given. */
export function postJson(path: string, body: unknown, apiKey = ADMIN_TOKEN): Promise<Response> {
  return request(path, {
    method: 'POST',
    apiKey,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

export function client(apiKey: string | undefined = ADMIN_TOKEN): SkiplockClient {
  return skiplockClient(BASE_URL, { apiKey, fetch: workerFetch });
}

/** The Worker tests share one database: names of their own keep each test's rows apart. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${crypto.randomUUID()}`;
}

/** The body of a typed client's response, which must be a success. */
export const success = successBody;

/** Creates an API key through the API and returns its secret. */
export async function createKey(scopes: ApiKeyScope[], tenant?: string, workerId?: string): Promise<string> {
  return (await success(client().v1.keys.$post({ json: { name: uniqueName('test-key'), scopes, tenant, workerId } })))
    .secret;
}

/** Enqueues a new job (201) and answers it. */
export async function enqueueJob(
  queue: string,
  json: { tenant?: string; payload?: unknown; type?: string; ttlSeconds?: number; delaySeconds?: number } = {},
  apiKey = ADMIN_TOKEN,
) {
  const response = await client(apiKey).v1.queues[':queue'].jobs.$post({ param: { queue }, json, header: {} });
  if (response.status !== 201) throw new Error(`expected 201, got ${response.status}: ${await response.text()}`);
  return response.json();
}

/** Claims the next job of a queue, as a pull worker would. */
export async function claimOne(queue: string, apiKey = ADMIN_TOKEN) {
  const claim = client(apiKey).v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'test-worker' } });
  const [job] = (await success(claim)).jobs;
  if (job === undefined) throw new Error(`nothing to claim in ${queue}`);
  return job;
}

/** Asserts a typed client's response status, which narrows its body to that status's type. */
export function expectStatus<R extends { status: number }, S extends R['status']>(
  response: R,
  status: S,
): asserts response is Extract<R, { status: S }> {
  expect(response.status).toBe(status);
}

/** Reads a problem response, checking its content type. */
export async function problemOf(response: { headers: Headers; json(): Promise<unknown> }) {
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  return (await response.json()) as ProblemDocument;
}
