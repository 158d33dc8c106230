import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/types';
import { defineCloudflareQueueDelivery, QueueDeliveries, type DeliveredJob, type QueueMessage } from '../../src/drain';
import { defineJob, type JobDefinition } from '../../src/drain/define-job';
import { httpJob } from '../../src/drain/handlers/http';
import {
  enqueue,
  enqueueFlow,
  InvalidInputError,
  inEnqueueSpan,
  maintainHistory,
  openTelemetry,
  setQueue,
  type Tracing,
} from '../../src/engine';
import { createClient } from '../../src/http/client';
import { apiOver } from '../support/api-over';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';
import { startWorker } from '../../src/node-worker/start-worker';
import { drain, jobById, recordingLogger, untilStatus } from './support/drain';
import { startReceiver } from './support/receiver';

const open = engineDatabases();
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('the application');
const tracing = openTelemetry(api, { tracer: provider.getTracer('skiplock') });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  // As the Node SDK does: the active span follows async calls, so a handler's spans find their attempt's.
  api.context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  api.context.disable();
});
afterEach(() => exporter.reset());

function spanNamed(name: string): ReadableSpan {
  const found = exporter.getFinishedSpans().filter((span) => span.name === name);
  expect(found, `spans named ${name}`).toHaveLength(1);
  return found[0]!;
}

function spansNamed(name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name === name);
}

async function traceContextRows(
  db: Db,
): Promise<Array<{ job_id: string; traceparent: string; tracestate: string | null }>> {
  return db.query({
    text: 'SELECT job_id, traceparent, tracestate FROM skiplock.job_trace_contexts ORDER BY job_id',
    params: [],
  });
}

const sendEmail = defineJob('send-email', z.object({ to: z.string() }), async (payload, context) => {
  // The handler's own span: a child of its attempt's, through the active context.
  const span = tracer.startSpan('render email', { attributes: { to: payload.to } });
  span.end();
  return { traceparent: context.traceparent ?? null };
});

describe('tracing', () => {
  it("puts the enqueue and the attempt in the request's trace, the handler's spans under the attempt", async () => {
    const { db } = await open('pg');
    const handle = await tracer.startActiveSpan('POST /signup', async (request) => {
      try {
        return await inEnqueueSpan(tracing, { queue: 'send-email', jobs: 1 }, (context) =>
          enqueue(db, sendEmail, { to: 'ada@example.com' }, { ...context }),
        );
      } finally {
        request.end();
      }
    });

    const counts = await drain(db, [sendEmail], { tracing });

    expect(counts).toMatchObject({ succeeded: 1 });
    const request = spanNamed('POST /signup');
    const send = spanNamed('send send-email');
    const process = spanNamed('process send-email');
    const render = spanNamed('render email');
    const traceId = request.spanContext().traceId;
    expect([send, process, render].map((span) => span.spanContext().traceId)).toEqual([traceId, traceId, traceId]);
    expect(send.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(process.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
    expect(render.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    // The messaging conventions: the process span links to the message's creation context too.
    expect(process.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(send.kind).toBe(api.SpanKind.PRODUCER);
    expect(process.kind).toBe(api.SpanKind.CONSUMER);
    expect(send.attributes).toEqual({
      'messaging.system': 'skiplock',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.destination.name': 'send-email',
    });
    expect(process.attributes).toEqual({
      'messaging.system': 'skiplock',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': 'send-email',
      'messaging.message.id': handle.id,
      'skiplock.job.type': 'send-email',
      'skiplock.job.tenant': 'default',
      'skiplock.job.attempt': 1,
      'skiplock.job.outcome': 'succeeded',
    });
    // The claim that took it: a span of its own, linked to the job's creation context.
    const receive = spanNamed('receive send-email');
    expect(receive.kind).toBe(api.SpanKind.CLIENT);
    expect(receive.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(receive.attributes).toMatchObject({
      'messaging.operation.type': 'receive',
      'messaging.batch.message_count': 1,
      'messaging.destination.name': 'send-email',
    });
    // The handler's traceparent is its attempt's span, to pass on.
    expect(await handle.result()).toEqual({
      traceparent: `00-${traceId}-${process.spanContext().spanId}-01`,
    });
  });

  it.each(DRIVERS)(
    'runs each attempt of a job in a span of its own, the failed one marked so, both under the enqueue (%s)',
    async (driver) => {
      const { db } = await open(driver);
      const flaky = defineJob('flaky', z.null(), (_payload, context) => {
        if (context.attempt === 1) throw new TypeError('the first attempt fails');
        return 'ok';
      });
      const creation = {
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'vendor=abc',
      };
      const { job } = await enqueue(db, { queue: 'flaky', payload: null, backoffMaxSeconds: 0, ...creation });

      await drain(db, [flaky], { tracing });
      await drain(db, [flaky], { tracing });

      expect((await jobById(db, job.id)).status).toBe('succeeded');
      const [first, second] = spansNamed('process flaky').sort(
        (a, b) => Number(a.attributes['skiplock.job.attempt']) - Number(b.attributes['skiplock.job.attempt']),
      );
      for (const attempt of [first!, second!]) {
        expect(attempt.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
        expect(attempt.parentSpanContext).toMatchObject({ spanId: 'b7ad6b7169203331', isRemote: true });
        expect(attempt.parentSpanContext?.traceState?.get('vendor')).toBe('abc');
      }
      expect(first!.status).toEqual({ code: api.SpanStatusCode.ERROR, message: 'the first attempt fails' });
      expect(first!.attributes).toMatchObject({ 'skiplock.job.outcome': 'failed', 'error.type': 'TypeError' });
      expect(second!.status.code).toBe(api.SpanStatusCode.UNSET);
    },
  );

  it('traces the attempts of a Node worker given tracing', async () => {
    const { db, url } = await open('pg');
    const { job } = await enqueue(db, {
      queue: 'send-email',
      type: 'send-email',
      payload: { to: 'grace@example.com' },
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    const worker = await startWorker({ databaseUrl: url, handlers: [sendEmail], tracing, logger: recordingLogger() });
    try {
      await untilStatus(db, job.id, 'succeeded');
    } finally {
      await worker.stop();
    }

    const process = spanNamed('process send-email');
    expect(process.parentSpanContext).toMatchObject({ spanId: 'b7ad6b7169203331', isRemote: true });
    expect(spanNamed('render email').parentSpanContext?.spanId).toBe(process.spanContext().spanId);
  });

  it("runs each durable step in a span under its attempt's, and the step's own spans under it", async () => {
    const { db } = await open('pg');
    const checkout = defineJob('checkout', z.null(), async (_payload, context) => {
      const charged = await context.step.do('charge', () => {
        tracer.startSpan('card network').end();
        return 'charged';
      });
      await context.step.do('refuse', () => Promise.reject(new RangeError('out of stock'))).catch(() => undefined);
      return charged;
    });
    await enqueue(db, { queue: 'checkout', payload: null });

    await drain(db, [checkout], { tracing });

    const process = spanNamed('process checkout');
    const charge = spanNamed('step charge');
    expect(charge.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    expect(charge.attributes).toMatchObject({ 'messaging.system': 'skiplock', 'skiplock.step.name': 'charge' });
    expect(spanNamed('card network').parentSpanContext?.spanId).toBe(charge.spanContext().spanId);
    expect(spanNamed('step refuse').status).toEqual({ code: api.SpanStatusCode.ERROR, message: 'out of stock' });
  });

  it.each(DRIVERS)(
    'keeps the context of a new job only, and drops it once the job has finished (%s)',
    async (driver) => {
      const { db } = await open(driver);
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';
      const first = await enqueue(db, { queue: 'once', dedupKey: 'k', traceparent });
      const again = await enqueue(db, {
        queue: 'once',
        dedupKey: 'k',
        traceparent: '00-11111111111111111111111111111111-2222222222222222-01',
      });
      const untraced = await enqueue(db, { queue: 'once' });

      expect(again).toMatchObject({ deduplicated: true, job: { id: first.job.id } });
      expect(untraced.deduplicated).toBe(false);
      expect(await traceContextRows(db)).toEqual([{ job_id: first.job.id, traceparent, tracestate: null }]);

      // Without tracing the drain reads no context, and its handlers get none.
      const seen: Array<string | undefined> = [];
      const once = defineJob('once', z.unknown(), (_payload, context) => void seen.push(context.traceparent));
      await drain(db, [once]);
      expect(seen).toEqual([undefined, undefined]);
      expect(exporter.getFinishedSpans()).toEqual([]);

      expect(await maintainHistory(db, { retentionSeconds: 86_400 })).toMatchObject({ prunedTraceContexts: 1 });
      expect(await traceContextRows(db)).toEqual([]);
    },
  );

  it('refuses a trace context that is not W3C, naming the field, and stores nothing', async () => {
    const { db } = await open('pg');
    const refusals = [
      [{ traceparent: '00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01' }, 'jobs.0.traceparent'],
      [{ traceparent: '00-00000000000000000000000000000000-b7ad6b7169203331-01' }, 'jobs.0.traceparent'],
      [{ traceparent: '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01' }, 'jobs.0.traceparent'],
      [{ traceparent: '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, 'jobs.0.traceparent'],
      [{ traceparent: 'not a traceparent' }, 'jobs.0.traceparent'],
      [{ tracestate: 'vendor=abc' }, 'jobs.0.tracestate'],
      [
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'no equals sign' },
        'jobs.0.tracestate',
      ],
      [
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: `a=${'x'.repeat(600)}` },
        'jobs.0.tracestate',
      ],
    ] as const;
    for (const [context, field] of refusals) {
      const refused = await enqueue(db, { queue: 'q', ...context }).catch((error: unknown) => error);
      expect(refused, JSON.stringify(context)).toBeInstanceOf(InvalidInputError);
      expect((refused as InvalidInputError).field).toBe(field);
    }
    expect(await db.query({ text: 'SELECT count(*)::integer AS n FROM skiplock.jobs', params: [] })).toEqual([
      { n: 0 },
    ]);
    expect(await traceContextRows(db)).toEqual([]);
  });
});

describe('tracing over HTTP', () => {
  const ADMIN = 'tracing-admin-token';
  /** The API over `db`, as a Worker serves it, tracing its enqueues when given `tracing`. */
  function tracedApiOver(db: Db, withTracing?: Tracing) {
    const app = apiOver(db, ADMIN, { tracing: withTracing });
    const post = (path: string, headers: Record<string, string>, body: unknown = {}) =>
      app.request(path, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const client = createClient('http://skiplock.test', {
      apiKey: ADMIN,
      fetch: async (input, init) => app.request(input instanceof Request ? input : input.toString(), init),
    });
    return { post, client };
  }

  const traced = defineJob('traced', z.unknown(), (_payload, context) => ({
    traceparent: context.traceparent ?? null,
  }));

  it("puts a request's enqueue span under its traceparent header, and the job's attempt under the enqueue", async () => {
    const { db } = await open('pg');
    const { client } = tracedApiOver(db, tracing);
    const caller = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

    const handle = await client.enqueue('traced', null, { traceparent: caller, tracestate: 'congo=t61rcWkgMzE' });
    await drain(db, [traced], { tracing });

    const send = spanNamed('send traced');
    const process = spanNamed('process traced');
    expect(send.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(send.parentSpanContext).toMatchObject({ spanId: '00f067aa0ba902b7', isRemote: true });
    expect(send.spanContext().traceState?.get('congo')).toBe('t61rcWkgMzE');
    expect(process.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
    expect(await handle.result()).toEqual({
      traceparent: `00-4bf92f3577b34da6a3ce929d0e0e4736-${process.spanContext().spanId}-01`,
    });
  });

  it('keeps the traceparent header as it is when the API does not trace, for every job of a batch', async () => {
    const { db } = await open('pg');
    const { post } = tracedApiOver(db);
    const caller = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

    const response = await post('/v1/queues/traced/jobs/batch', { traceparent: caller }, { jobs: [{}, {}] });

    expect(response.status).toBe(201);
    const { jobs } = (await response.json()) as { jobs: Array<{ id: string }> };
    expect(await traceContextRows(db)).toEqual(
      jobs
        .map(({ id }) => ({ job_id: id, traceparent: caller, tracestate: null }))
        .sort((a, b) => a.job_id.localeCompare(b.job_id)),
    );
    await drain(db, [traced], { tracing });
    expect(spansNamed('process traced').map((span) => span.parentSpanContext?.spanId)).toEqual([
      'b7ad6b7169203331',
      'b7ad6b7169203331',
    ]);
  });

  it("answers a pull worker's claim each job's trace context when it asks for it, and only then", async () => {
    const { db } = await open('pg');
    const { post } = tracedApiOver(db);
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await post('/v1/queues/pulled/jobs/batch', { traceparent, tracestate: 'vendor=abc' }, { jobs: [{}, {}] });
    const claim = async (body: object) =>
      (
        (await (await post('/v1/queues/pulled/claim', {}, { workerId: 'puller', max: 1, ...body })).json()) as {
          jobs: Array<{ traceContext?: unknown }>;
        }
      ).jobs;

    expect((await claim({})).map((job) => job.traceContext)).toEqual([undefined]);
    expect((await claim({ traceContext: true })).map((job) => job.traceContext)).toEqual([
      { traceparent, tracestate: 'vendor=abc' },
    ]);
  });

  it('answers 400 naming the header for a traceparent or tracestate that is not W3C, and stores nothing', async () => {
    const { db } = await open('pg');
    const { post } = tracedApiOver(db, tracing);
    const refusals: Array<[Record<string, string>, string]> = [
      [{ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7' }, 'traceparent'],
      [{ traceparent: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }, 'traceparent'],
      [{ tracestate: 'congo=t61rcWkgMzE' }, 'tracestate'],
      [
        { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'Upper=case' },
        'tracestate',
      ],
    ];
    for (const [headers, field] of refusals) {
      const response = await post('/v1/queues/traced/jobs', headers);
      expect(response.status, JSON.stringify(headers)).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = (await response.json()) as { errors: Array<{ path: string }> };
      expect(problem.errors.map((error) => error.path)).toEqual([field]);
    }
    expect(await db.query({ text: 'SELECT count(*)::integer AS n FROM skiplock.jobs', params: [] })).toEqual([
      { n: 0 },
    ]);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('tracing across jobs', () => {
  const CALLER = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };
  const callerContext = { traceparent: `00-${CALLER.traceId}-${CALLER.spanId}-01`, tracestate: 'vendor=abc' };

  /** Drains until a drain claims nothing: a parent resumes once its children have ended, a callback comes with its job's end. */
  async function drainAll(db: Db, jobs: readonly JobDefinition[], options: Parameters<typeof drain>[2] = {}) {
    for (let round = 0; round < 10; round++) {
      const counts = await drain(db, jobs, options);
      if (counts.claimed === 0) return;
    }
    throw new Error('the jobs did not settle');
  }

  const attemptsOf = (jobId: string): ReadableSpan[] =>
    exporter
      .getFinishedSpans()
      .filter((span) => span.name.startsWith('process ') && span.attributes['messaging.message.id'] === jobId);

  /** A parent that invokes two children, then enqueues a job and a flow of its own, in its trace. */
  function albumJobs(db: Db) {
    const resize = defineJob('resize', z.object({ size: z.number() }), () => {
      tracer.startSpan('resize pixels').end();
      return 'resized';
    });
    const notify = defineJob('notify', z.null(), () => 'notified');
    const album = defineJob('album', z.null(), async (_payload, context) => {
      const [small, large] = await Promise.all([
        context.step.invoke('small', resize, { size: 64 }),
        context.step.invoke('large', resize, { size: 1024 }),
      ]);
      await enqueue(db, notify, null, { ...context.traceContext });
      await enqueueFlow(db, {
        jobs: [
          { ref: 'first', queue: 'notify', type: 'notify', payload: null, ...context.traceContext },
          {
            ref: 'then',
            queue: 'notify',
            type: 'notify',
            payload: null,
            dependsOn: ['first'],
            ...context.traceContext,
          },
        ],
      });
      return [small.ok, large.ok];
    });
    return [album, resize, notify];
  }

  it("puts the children a step invokes, and the jobs and flows its handler enqueues, in the parent's trace", async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'album', payload: null, ...callerContext });

    await drainAll(db, albumJobs(db), { tracing });

    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', lastError: null });
    const parentAttempts = attemptsOf(job.id);
    const outcomeOf = (span: ReadableSpan) => span.attributes['skiplock.job.outcome'];
    expect(parentAttempts.map(outcomeOf).sort()).toEqual(['parked', 'succeeded']);
    const invoking = parentAttempts.find((span) => outcomeOf(span) === 'parked')!;
    const resumed = parentAttempts.find((span) => outcomeOf(span) === 'succeeded')!;
    const children = spansNamed('process resize');
    expect(children).toHaveLength(2);
    for (const child of children) {
      expect(child.spanContext().traceId).toBe(CALLER.traceId);
      expect(child.parentSpanContext?.spanId).toBe(invoking.spanContext().spanId);
      expect(child.parentSpanContext?.traceState?.get('vendor')).toBe('abc');
    }
    expect(
      spansNamed('resize pixels')
        .map((span) => span.parentSpanContext?.spanId)
        .sort(),
    ).toEqual(children.map((child) => child.spanContext().spanId).sort());
    // The job it enqueued and the flow's two jobs: under the attempt that enqueued them.
    const enqueued = spansNamed('process notify');
    expect(enqueued).toHaveLength(3);
    expect(enqueued.map((span) => span.parentSpanContext?.spanId)).toEqual(Array(3).fill(resumed.spanContext().spanId));
    expect(new Set(enqueued.map((span) => span.spanContext().traceId))).toEqual(new Set([CALLER.traceId]));
  });

  it('keeps no context for the children of a drain that does not trace', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'album', payload: null, ...callerContext });

    await drainAll(db, albumJobs(db), { housekeeping: false });

    expect((await jobById(db, job.id)).status).toBe('succeeded');
    expect(await db.query({ text: 'SELECT count(*)::integer AS n FROM skiplock.all_jobs', params: [] })).toEqual([
      { n: 6 },
    ]);
    expect(await traceContextRows(db)).toEqual([
      { job_id: job.id, traceparent: callerContext.traceparent, tracestate: 'vendor=abc' },
    ]);
    // skiplock made no span: the children's own spans start traces of their own.
    expect(exporter.getFinishedSpans().map((span) => [span.name, span.parentSpanContext])).toEqual([
      ['resize pixels', undefined],
      ['resize pixels', undefined],
    ]);
  });

  /** A receiver of webhook POSTs on 127.0.0.1, closed after the test. */
  async function receiverFor(test: { onTestFinished(fn: () => Promise<void>): void }) {
    const started = await startReceiver(() => ({ status: 204 }));
    test.onTestFinished(() => started.close());
    return started;
  }

  it("delivers a queue's jobs to its webhook in a deliver span under their attempts, whose traceparent the POST carries", async ({
    onTestFinished,
  }) => {
    const { db } = await open('pg');
    const receiver = await receiverFor({ onTestFinished });
    await setQueue(db, 'orders-out', {
      concurrency: null,
      weight: 1,
      delivery: { target: 'webhook', url: `${receiver.base}/orders` },
    });
    const other = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const first = await enqueue(db, { queue: 'orders-out', type: 'order', payload: { n: 1 }, ...callerContext });
    const second = await enqueue(db, { queue: 'orders-out', type: 'order', payload: { n: 2 }, traceparent: other });
    const deliveries = new QueueDeliveries({
      http: { allowedHosts: [`127.0.0.1:${receiver.port}`] },
      secret: () => undefined,
    });

    await drain(db, [], { tracing, deliveries, concurrency: 2 });

    const [post, ...more] = receiver.received;
    expect(more).toEqual([]);
    const [firstAttempt] = attemptsOf(first.job.id);
    const [secondAttempt] = attemptsOf(second.job.id);
    const deliver = spanNamed('deliver orders-out');
    expect(deliver.kind).toBe(api.SpanKind.PRODUCER);
    expect(deliver.attributes).toEqual({
      'messaging.system': 'skiplock',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'deliver',
      'messaging.destination.name': 'orders-out',
      'messaging.batch.message_count': 2,
      'skiplock.delivery.target': 'webhook',
      'server.address': '127.0.0.1',
    });
    // Under the first job's attempt, linked to both: one POST, two jobs of two traces.
    expect(deliver.spanContext().traceId).toBe(CALLER.traceId);
    expect(deliver.parentSpanContext?.spanId).toBe(firstAttempt!.spanContext().spanId);
    expect(deliver.links.map((link) => link.context.spanId)).toEqual([
      firstAttempt!.spanContext().spanId,
      secondAttempt!.spanContext().spanId,
    ]);
    // The receiver continues the deliver span's trace, and each job's own from its entry.
    expect(post!.headers.traceparent).toBe(`00-${CALLER.traceId}-${deliver.spanContext().spanId}-01`);
    expect(post!.headers.tracestate).toBe('vendor=abc');
    const entries = (JSON.parse(post!.body) as { data: { jobs: DeliveredJob[] } }).data.jobs;
    expect(entries.map((entry) => [entry.id, entry.traceparent])).toEqual([
      [first.job.id, `00-${CALLER.traceId}-${firstAttempt!.spanContext().spanId}-01`],
      [second.job.id, `00-4bf92f3577b34da6a3ce929d0e0e4736-${secondAttempt!.spanContext().spanId}-01`],
    ]);
  });

  it('marks a delivery the receiver refused as failed, and adds nothing to a POST when the drain does not trace', async ({
    onTestFinished,
  }) => {
    const { db } = await open('pg');
    const refusing = await startReceiver(() => ({ status: 503 }));
    onTestFinished(() => refusing.close());
    await setQueue(db, 'orders-out', {
      concurrency: null,
      weight: 1,
      delivery: { target: 'webhook', url: `${refusing.base}/orders` },
    });
    // Full-jitter backoff may draw a retry at once, which the first drain would then take too.
    await enqueue(db, {
      queue: 'orders-out',
      type: 'order',
      payload: { n: 1 },
      backoffBaseSeconds: 3600,
      ...callerContext,
    });
    const deliveries = new QueueDeliveries({
      http: { allowedHosts: [`127.0.0.1:${refusing.port}`] },
      secret: () => undefined,
    });

    await drain(db, [], { tracing, deliveries });
    await db.query({ text: `UPDATE skiplock.jobs SET run_at = now() WHERE queue = 'orders-out'`, params: [] });
    await drain(db, [], { deliveries });

    expect(spanNamed('deliver orders-out').status.code).toBe(api.SpanStatusCode.ERROR);
    const [traced, untraced] = refusing.received;
    expect(traced!.headers.traceparent).toMatch(new RegExp(`^00-${CALLER.traceId}-`));
    expect(untraced!.headers.traceparent).toBeUndefined();
    expect(untraced!.headers.tracestate).toBeUndefined();
    const [entry] = (JSON.parse(untraced!.body) as { data: { jobs: DeliveredJob[] } }).data.jobs;
    expect(Object.keys(entry!).sort()).toEqual(['attempt', 'createdAt', 'id', 'payload', 'queue', 'tenant', 'type']);
  });

  it('puts the trace context of each job in its Cloudflare queue message, and each sendBatch call in a span', async () => {
    const { db } = await open('pg');
    const sent: QueueMessage[] = [];
    const events = defineCloudflareQueueDelivery('events', z.unknown(), {
      queue: { sendBatch: async (messages) => void sent.push(...messages) },
    });
    const { job } = await enqueue(db, { queue: 'events', payload: { n: 1 }, ...callerContext });

    await drain(db, [events], { tracing });

    const [attempt] = attemptsOf(job.id);
    const deliver = spanNamed('deliver events');
    expect(deliver.parentSpanContext?.spanId).toBe(attempt!.spanContext().spanId);
    expect(deliver.attributes['skiplock.delivery.target']).toBe('cloudflare-queue');
    expect(sent.map((message) => message.body)).toEqual([
      expect.objectContaining({
        id: job.id,
        traceparent: `00-${CALLER.traceId}-${attempt!.spanContext().spanId}-01`,
        tracestate: 'vendor=abc',
      }),
    ]);
  });

  /** A report job, and the http job that delivers its callbacks to a receiver of the test's. */
  async function reportWithCallbacks(test: { onTestFinished(fn: () => Promise<void>): void }) {
    const receiver = await receiverFor(test);
    const report = defineJob('report', z.null(), () => 'made');
    return { receiver, jobs: [report, httpJob({ allowedHosts: [`127.0.0.1:${receiver.port}`] })] };
  }

  it("announces a job's end in its trace: the callback's attempt under the job's context, its POST carrying it", async ({
    onTestFinished,
  }) => {
    const { db } = await open('pg');
    const { receiver, jobs } = await reportWithCallbacks({ onTestFinished });
    const { job } = await enqueue(db, {
      queue: 'report',
      payload: null,
      callbackUrl: `${receiver.base}/done`,
      ...callerContext,
    });

    await drainAll(db, jobs, { tracing });

    const [callback] = spansNamed('process skiplock.callbacks');
    expect(callback!.spanContext().traceId).toBe(CALLER.traceId);
    expect(callback!.parentSpanContext).toMatchObject({ spanId: CALLER.spanId, isRemote: true });
    expect(attemptsOf(job.id).map((span) => span.parentSpanContext?.spanId)).toEqual([CALLER.spanId]);
    const [post] = receiver.at('/done');
    expect(post!.headers.traceparent).toBe(`00-${CALLER.traceId}-${callback!.spanContext().spanId}-01`);
    expect(post!.headers.tracestate).toBe('vendor=abc');
  });

  it('keeps no context for a callback of a job that kept none, and sends no traceparent without tracing', async ({
    onTestFinished,
  }) => {
    const { db } = await open('pg');
    const { receiver, jobs } = await reportWithCallbacks({ onTestFinished });
    await enqueue(db, { queue: 'report', payload: null, callbackUrl: `${receiver.base}/untraced` });
    await enqueue(db, { queue: 'report', payload: null, callbackUrl: `${receiver.base}/traced`, ...callerContext });

    await drainAll(db, jobs, { housekeeping: false });

    const callbacks = await db.query<{ id: string; url: string }>({
      text: `SELECT id, payload->>'url' AS url FROM skiplock.all_jobs WHERE queue = 'skiplock.callbacks' ORDER BY id`,
      params: [],
    });
    const rows = await traceContextRows(db);
    // The traced job's callback keeps its context (the drain that runs it traces or not); the other keeps none.
    const tracedCallback = callbacks.find((callback) => callback.url.endsWith('/traced'))!;
    expect(rows.filter((row) => callbacks.some((callback) => callback.id === row.job_id))).toEqual([
      { job_id: tracedCallback.id, traceparent: callerContext.traceparent, tracestate: 'vendor=abc' },
    ]);
    expect(receiver.received.map((request) => request.headers.traceparent)).toEqual([undefined, undefined]);
  });
});
