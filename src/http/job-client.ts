import type { z } from '@hono/zod-openapi';
import { JobNotSucceededError, JobWaitTimeoutError, type ResultOptions } from '../engine/job-handle.js';
import type { SentEvent } from '../engine/events.js';
import type { JobType, PayloadOf, ResultOf } from '../engine/job-type.js';
import type { JobSteps } from '../engine/steps.js';
import { FINAL_STATUSES, type Job, type JobStatus } from '../engine/types.js';
import type { ProblemDocument } from './problem.js';
import type { EnqueueBodySchema } from './schemas/enqueue.js';
import type { FlowBodySchema, SendEventBodySchema } from './schemas/steps.js';

/** A job as an enqueue answers it: the job, its browser status URL, and whether a dedup key matched. */
export interface EnqueuedJob extends Job {
  statusUrl: string | null;
  deduplicated: boolean;
  /** A debounceKey matched: the job now has this enqueue's payload, its start moved. */
  debounced: boolean;
  /** A dedupKey with dedupOnConflict `replace` matched: the job now has this enqueue's payload. */
  replaced: boolean;
}

/** A job answered to a key without the `read` scope (a dedup hit, a cancel): by id and status only. */
export interface JobReference {
  id: string;
  status: JobStatus;
}

/** A dedup hit answered to a key without the `read` scope: the matched job by id and status only. */
export interface EnqueuedJobReference extends JobReference {
  statusUrl: string | null;
  deduplicated: true;
  debounced: boolean;
  replaced: boolean;
}

/** Everything of an enqueue request but the type and payload, which the job type's form gives. */
export type ClientEnqueueOptions = Omit<z.input<typeof EnqueueBodySchema>, 'type' | 'payload'> & {
  /** Defaults to the job type's name. */
  queue?: string;
  /** Sent as the Idempotency-Key header: a retried request gets the first one's job back. */
  idempotencyKey?: string;
  /** Sent as the `traceparent` header (W3C Trace Context): the jobs' attempts join that trace. */
  traceparent?: string;
  /** Sent as the `tracestate` header, with `traceparent`. */
  tracestate?: string;
};

/**
 * An event for `sendEvent` (`POST /v1/events`): its name, and the key, payload,
 * tenant and `keepSeconds` (how long it is kept for jobs that reach their wait later).
 */
export type SendEventRequest = z.input<typeof SendEventBodySchema>;

/** A graph of jobs for `enqueueFlow` (`POST /v1/flows`): each job's `ref`, and the refs it `dependsOn`. */
export type FlowRequest = z.input<typeof FlowBodySchema>;

/** A job of an enqueued flow, as the API answered it: its ref in the flow, its id, status and start time. */
export interface EnqueuedFlowJob {
  ref: string;
  id: string;
  status: JobStatus;
  runAt: string;
}

/** A flow as enqueued: its jobs in request order, and a handle on each by its ref. */
export interface EnqueuedFlow {
  readonly jobs: readonly EnqueuedFlowJob[];
  /** A handle on the flow's job of this ref; a ref not in the flow throws. */
  job<Result = unknown>(ref: string): ClientJobHandle<Result>;
}

/** The API refused a request: its status and problem document. */
export class SkiplockApiError extends Error {
  override readonly name = 'SkiplockApiError';
  constructor(
    readonly status: number,
    readonly problem: Partial<ProblemDocument>,
  ) {
    super(`${status} ${problem.title ?? 'error'}${problem.detail ? `: ${problem.detail}` : ''}`);
  }

  /** The error a refused response stands for, with its problem document when it has one. */
  static async of(response: { status: number; json(): Promise<unknown> }): Promise<SkiplockApiError> {
    const problem = (await response.json().catch(() => ({}))) as Partial<ProblemDocument>;
    return new SkiplockApiError(response.status, problem);
  }
}

export interface FollowOptions extends ResultOptions {
  /** Called with the job as first read and again at each change, the final one included. */
  onChange?(job: Job): void;
}

/** One job over HTTP, typed by what its handler returns. */
export interface ClientJobHandle<Result = unknown> {
  readonly id: string;
  /**
   * The job as the enqueue answered it (by id and status only for a dedup
   * hit when the key lacks the `read` scope); undefined for a handle made from an id alone.
   */
  readonly enqueued: EnqueuedJob | EnqueuedJobReference | undefined;
  /** The job as it is now. */
  status(): Promise<Job>;
  /** Waits (long-polling `?wait`) for the job to end: its result when it succeeded, else JobNotSucceededError. */
  result(options?: ResultOptions): Promise<Result>;
  /** Follows the job until it ends, whatever the outcome, and answers it as it ended. */
  ended(options?: FollowOptions): Promise<Job>;
  /**
   * Cancels it: at once while it waits, at its next heartbeat while it runs.
   * Answers the job, or only its id and status to a key without the `read` scope.
   */
  cancel(): Promise<Job | JobReference>;
  /**
   * Its durable steps (`ctx.step`) as recorded so far, what it waits for now
   * (an event until its timeout, a child's end, its dependencies), and the
   * jobs it is linked to. Needs the `read` scope.
   */
  steps(): Promise<JobSteps>;
}

export interface JobClientOptions {
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Another fetch: a service binding's, or a test's. */
  fetch?: typeof fetch;
}

/** The longest `?wait` the API takes, in seconds. */
const MAX_WAIT_SECONDS = 30;

/**
 * Typed jobs over the HTTP API. With only a type import of a job definition
 * (`import type { sendWelcome } from './jobs'`), a wrong payload fails to compile:
 *
 *   const job = await client.enqueue<typeof sendWelcome>('send-welcome', { userId: 42 });
 *   const result = await job.result({ timeoutMs: 30_000 });   // typed by the handler's return type
 *
 * With the definition itself at hand, `client.enqueue(sendWelcome, { userId: 42 })`.
 */
export class JobClient {
  private readonly baseUrl: string;
  private readonly fetch: typeof fetch;
  private readonly headers: Record<string, string>;

  constructor(baseUrl: string, options: JobClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.headers = options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` };
  }

  async enqueue<J extends JobType>(
    job: J | J['type'],
    payload: PayloadOf<J>,
    options: ClientEnqueueOptions = {},
  ): Promise<ClientJobHandle<ResultOf<J>>> {
    const { queue, idempotencyKey, traceparent, tracestate, ...rest } = options;
    const type = typeof job === 'string' ? job : job.type;
    const enqueued = await this.request<EnqueuedJob | EnqueuedJobReference>(
      'POST',
      `/v1/queues/${encodeURIComponent(queue ?? type)}/jobs`,
      { ...rest, type, payload },
      enqueueHeaders(options),
    );
    return this.handle(enqueued.id, enqueued);
  }

  /** Up to 1,000 jobs of one type in one request and one transaction. */
  async enqueueBatch<J extends JobType>(
    job: J | J['type'],
    payloads: readonly PayloadOf<J>[],
    options: ClientEnqueueOptions = {},
  ): Promise<ClientJobHandle<ResultOf<J>>[]> {
    const { queue, idempotencyKey, traceparent, tracestate, ...rest } = options;
    const type = typeof job === 'string' ? job : job.type;
    const { jobs } = await this.request<{ jobs: (EnqueuedJob | EnqueuedJobReference)[] }>(
      'POST',
      `/v1/queues/${encodeURIComponent(queue ?? type)}/jobs/batch`,
      { jobs: payloads.map((payload) => ({ ...rest, type, payload })) },
      enqueueHeaders(options),
    );
    return jobs.map((enqueued) => this.handle(enqueued.id, enqueued));
  }

  /**
   * Enqueues a graph of jobs in one transaction, all or none: a job with
   * `dependsOn` waits until the jobs it names have ended. A cycle, or a
   * dependency on a ref not in the flow, is refused (SkiplockApiError, 400).
   *
   *   const flow = await client.enqueueFlow({ jobs: [
   *     { ref: 'fetch', queue: 'crawl' },
   *     { ref: 'index', queue: 'crawl', dependsOn: ['fetch'] },
   *   ] });
   *   await flow.job('index').result();
   */
  async enqueueFlow(flow: FlowRequest): Promise<EnqueuedFlow> {
    const { jobs } = await this.request<{ jobs: EnqueuedFlowJob[] }>('POST', '/v1/flows', flow);
    return {
      jobs,
      job: <Result = unknown>(ref: string): ClientJobHandle<Result> => {
        const found = jobs.find((job) => job.ref === ref);
        if (found === undefined) throw new Error(`no job with ref "${ref}" in this flow`);
        return this.handle<Result>(found.id, undefined);
      },
    };
  }

  /**
   * Sends an event: the tenant's jobs waiting for it (`ctx.step.waitForEvent`),
   * by its name and, when their wait named one, its key, resume with its
   * payload. Answers how many were woken. Needs the `events` scope.
   *
   *   const { woken } = await client.sendEvent({ event: 'order.paid', key: orderId, payload: { amount } });
   */
  sendEvent(event: SendEventRequest): Promise<SentEvent> {
    return this.request<SentEvent>('POST', '/v1/events', event);
  }

  /** A handle on a job enqueued earlier, by its id. */
  job<Result = unknown>(id: string): ClientJobHandle<Result> {
    return this.handle(id, undefined);
  }

  private handle<Result>(
    id: string,
    enqueued: EnqueuedJob | EnqueuedJobReference | undefined,
  ): ClientJobHandle<Result> {
    const path = `/v1/jobs/${encodeURIComponent(id)}`;
    return {
      id,
      enqueued,
      status: () => this.request<Job>('GET', path),
      result: async (options = {}) => {
        const ended = await this.waitUntilFinal(path, options);
        if (ended.status !== 'succeeded') throw new JobNotSucceededError(ended);
        return ended.result as Result;
      },
      ended: (options = {}) => this.waitUntilFinal(path, options),
      cancel: () => this.request<Job | JobReference>('POST', `${path}/cancel`),
      steps: () => this.request<JobSteps>('GET', `${path}/steps`),
    };
  }

  /** Long-polls the job: each `?wait` answers at its first change, or 304 when none came. */
  private async waitUntilFinal(path: string, options: FollowOptions): Promise<Job> {
    const deadline = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
    let { value: job, etag } = await this.exchange<Job>('GET', path);
    options.onChange?.(job!);
    while (!FINAL_STATUSES.includes(job!.status)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new JobWaitTimeoutError(job!, options.timeoutMs!);
      options.signal?.throwIfAborted();
      const wait = Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.floor(left / 1000)));
      const conditional: Record<string, string> = etag === undefined ? {} : { 'if-none-match': etag };
      const answer = await this.exchange<Job>('GET', `${path}?wait=${wait}`, undefined, conditional, options.signal);
      if (answer.value !== undefined) {
        ({ value: job, etag } = answer);
        options.onChange?.(job!);
      }
    }
    return job!;
  }

  private async request<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<T> {
    return (await this.exchange<T>(method, path, body, headers)).value!;
  }

  /** One request; a refusal throws SkiplockApiError, a 304 answers no value. */
  private async exchange<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<{ value: T | undefined; etag: string | undefined }> {
    const response = await this.fetch(this.baseUrl + path, {
      method,
      headers: { ...this.headers, ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      ...(signal === undefined ? {} : { signal }),
    });
    const etag = response.headers.get('etag') ?? undefined;
    if (response.status === 304) return { value: undefined, etag };
    if (!response.ok) throw await SkiplockApiError.of(response);
    return { value: (await response.json()) as T, etag };
  }
}

/** A typed job client of a skiplock deployment. */
export function createClient(baseUrl: string, options: JobClientOptions = {}): JobClient {
  return new JobClient(baseUrl, options);
}

/** The headers of an enqueue request: the options sent as headers, not in the body. */
function enqueueHeaders({ idempotencyKey, traceparent, tracestate }: ClientEnqueueOptions): Record<string, string> {
  return {
    ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    ...(traceparent === undefined ? {} : { traceparent }),
    ...(tracestate === undefined ? {} : { tracestate }),
  };
}
