import { hc, type ClientResponse } from 'hono/client';
import type { AppType } from './app.js';
import { SkiplockApiError } from './job-client.js';

export {
  createClient,
  JobClient,
  SkiplockApiError,
  type ClientEnqueueOptions,
  type ClientJobHandle,
  type EnqueuedFlow,
  type EnqueuedFlowJob,
  type EnqueuedJob,
  type FlowRequest,
  type FollowOptions,
  type EnqueuedJobReference,
  type JobClientOptions,
  type JobReference,
  type SendEventRequest,
} from './job-client.js';
export { JobNotSucceededError, JobWaitTimeoutError, type ResultOptions } from '../engine/job-handle.js';
export type { JobType, PayloadOf, ResultOf } from '../engine/job-type.js';
export type { SentEvent } from '../engine/events.js';
export type { JobStep, JobSteps, StepKind } from '../engine/steps.js';
export type { Job, JobStatus } from '../engine/types.js';

/**
 * The whole HTTP API as Hono's RPC client over the app's
 * own route types, so paths, bodies, queries and each status's response are
 * the zod schemas' types. For example:
 *
 *   const api = skiplockClient('https://queue.example.com', { apiKey });
 *   const res = await api.v1.queues[':queue'].jobs.$post({ param: { queue: 'emails' }, json: { payload } });
 *   if (res.status === 201) console.log((await res.json()).statusUrl);
 */
export type SkiplockClient = ReturnType<typeof hc<AppType>>;

export interface SkiplockClientOptions {
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Another fetch: a service binding's, or a test's. */
  fetch?: typeof fetch;
}

export function skiplockClient(baseUrl: string, options: SkiplockClientOptions = {}): SkiplockClient {
  return hc<AppType>(baseUrl, {
    ...(options.fetch ? { fetch: options.fetch } : {}),
    headers: options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` },
  });
}

type SuccessBody<R> =
  R extends ClientResponse<infer Body, infer Status, 'json'> ? (Status extends 200 | 201 | 202 ? Body : never) : never;

/**
 * The body of a skiplockClient call's success, typed by the route; a refusal
 * throws SkiplockApiError with its problem document, as the job client does:
 *
 *   const { jobs } = await successBody(api.v1.jobs.$get({ query: { status: 'failed' } }));
 */
export async function successBody<R extends ClientResponse<unknown, number, string>>(
  pending: Promise<R>,
): Promise<SuccessBody<R>> {
  const response = await pending;
  if (!response.ok) throw await SkiplockApiError.of(response);
  return (await response.json()) as SuccessBody<R>;
}
