import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createClient } from 'skiplock/client';
import { openTelemetry } from 'skiplock';
import { createSkiplock, defineJob } from 'skiplock/worker';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('the handler');
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  // As an SDK for Workers does (nodejs_compat): the active span follows the invocation's async calls.
  // Left registered: workerd's AsyncLocalStorage cannot be disabled.
  api.context.setGlobalContextManager(contextManager.enable());
});

const traced = defineJob('factory-traced', z.object({}), (_payload, context) => {
  tracer.startSpan('handler work').end();
  return { traceparent: context.traceparent ?? null };
});

const thumbnail = defineJob('factory-thumbnail', z.object({}), () => 'made');
const gallery = defineJob('factory-gallery', z.object({}), async (_payload, context) => {
  const child = await context.step.invoke('thumbnail', thumbnail, {});
  return { childId: child.jobId };
});

const worker = createSkiplock({
  jobs: [traced, thumbnail, gallery],
  fastPath: false,
  tracing: openTelemetry(api, { tracer: provider.getTracer('skiplock') }),
});

/** The typed client, over the Worker's fetch handler. */
function workerClient() {
  return createClient('http://skiplock.test', {
    apiKey: env.ADMIN_TOKEN,
    fetch: async (input, init) => {
      const ctx = createExecutionContext();
      const response = await worker.fetch(new Request(input, init), env, ctx);
      await waitOnExecutionContext(ctx);
      return response;
    },
  });
}

function spanNamed(name: string, jobId?: string): ReadableSpan {
  const found = exporter
    .getFinishedSpans()
    .filter((span) => span.name === name && (jobId === undefined || span.attributes['messaging.message.id'] === jobId));
  expect(found, `spans named ${name}`).toHaveLength(1);
  return found[0]!;
}

describe('tracing in workerd', () => {
  it("traces the API's enqueue under the request's traceparent, and the cron drain's attempt under the enqueue", async () => {
    const client = workerClient();
    const traceId = crypto.randomUUID().replaceAll('-', '');
    const caller = `00-${traceId}-00f067aa0ba902b7-01`;

    const handle = await client.enqueue(traced, {}, { tenant: `factory-${crypto.randomUUID()}`, traceparent: caller });
    await worker.scheduled(createScheduledController({ cron: '* * * * *' }), env);

    const result = await handle.result({ timeoutMs: 10_000 });
    const send = exporter
      .getFinishedSpans()
      .find((span) => span.spanContext().traceId === traceId && span.name === 'send factory-traced');
    const process = spanNamed('process factory-traced', handle.id);
    expect(send?.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(process.spanContext().traceId).toBe(traceId);
    expect(process.parentSpanContext?.spanId).toBe(send?.spanContext().spanId);
    const work = exporter
      .getFinishedSpans()
      .filter(
        (span) => span.name === 'handler work' && span.parentSpanContext?.spanId === process.spanContext().spanId,
      );
    expect(work).toHaveLength(1);
    expect(result).toEqual({ traceparent: `00-${traceId}-${process.spanContext().spanId}-01` });
  });

  it("runs a child that a step invokes in its parent's trace, under the parent's attempt", async () => {
    const client = workerClient();
    const traceId = crypto.randomUUID().replaceAll('-', '');
    const handle = await client.enqueue(
      gallery,
      {},
      { tenant: `factory-${crypto.randomUUID()}`, traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    );

    // The parent parks on its child, the child runs, the parent resumes: a cron drain each, at most.
    for (let drain = 0; drain < 3; drain++) {
      await worker.scheduled(createScheduledController({ cron: '* * * * *' }), env);
    }
    const { childId } = (await handle.result({ timeoutMs: 10_000 })) as { childId: string };

    const invoking = exporter
      .getFinishedSpans()
      .find(
        (span) =>
          span.name === 'process factory-gallery' &&
          span.attributes['messaging.message.id'] === handle.id &&
          span.attributes['skiplock.job.outcome'] === 'parked',
      );
    const child = spanNamed('process factory-thumbnail', childId);
    expect(child.spanContext().traceId).toBe(traceId);
    expect(child.parentSpanContext?.spanId).toBe(invoking?.spanContext().spanId);
  });
});
