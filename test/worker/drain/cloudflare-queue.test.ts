import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCloudflareQueueDelivery, type DeliveredJob } from '../../../src/drain';
import { QUEUE_LIMITS } from '../../../src/drain/bulk-delivery/cloudflare-queue';
import { drainOnce } from '../../../src/drain/drain-once';
import { createRegistry } from '../../../src/drain/registry';
import { enqueueBatch, type EnqueueInput } from '../../../src/engine';
import { sleep } from '../../../src/engine/sleep';
import { scheduledDrain } from '../../../src/worker/drain';
import { drainRuntime, httpDatabase } from '../support/databases';
import { ADMIN_TOKEN, client, problemOf, request, success } from '../http/support/api';
import { jobById, uniqueName } from './support/jobs';
import { waitFor } from '../../support/wait-for';

const quiet = { info() {}, warn() {}, error() {} };

interface Kept {
  queue: string;
  body: DeliveredJob<{ n: number; blob?: string | null }>;
}

/** What the test queue's consumer has received of these job ids, waiting for `count` of them. */
async function consumed(ids: ReadonlySet<string>, count: number): Promise<Kept[]> {
  return waitFor(
    `the consumer to get ${count} of the jobs`,
    async () => {
      const kept = ((await (await env.QUEUE_SINK.fetch('http://queue-sink/')).json()) as Kept[]).filter((message) =>
        ids.has(message.body.id),
      );
      return kept.length >= count && kept;
    },
    { everyMs: 100 },
  );
}

describe('bulk delivery to a Cloudflare queue, in workerd with a real producer binding', () => {
  it('sends each batch in sendBatch calls within the queue limits; the consumer gets every job as a message', async () => {
    const type = uniqueName('to-queue');
    const calls: Array<{ messages: number; bytes: number }> = [];
    const producer = {
      sendBatch(messages: Iterable<{ body: unknown }>) {
        const sent = [...messages];
        calls.push({
          messages: sent.length,
          bytes: sent.reduce((sum, message) => sum + JSON.stringify(message.body).length, 0),
        });
        return env.TEST_QUEUE.sendBatch(sent);
      },
    };
    const toQueue = defineCloudflareQueueDelivery(type, z.object({ n: z.number(), blob: z.string().nullable() }), {
      queue: () => producer,
      batchSize: 250,
    });
    // Ten of the 250 jobs carry 100 KB: the 256 KB a call allows splits batches by bytes as well as by count.
    const blob = 'x'.repeat(100 * 1024);
    const inputs: EnqueueInput[] = Array.from({ length: 250 }, (_, n) => ({
      queue: 'outbox',
      type,
      tenant: `t${n % 3}`,
      payload: n % 25 === 0 ? { n, blob } : { n, blob: null },
    }));
    const enqueued = await enqueueBatch(httpDatabase(env), inputs);
    const ids = new Set(enqueued.map(({ job }) => job.id));

    const counts = await drainOnce(httpDatabase(env), createRegistry([toQueue]), {
      budgetSeconds: 25,
      concurrency: 250,
      housekeeping: false,
      logger: quiet,
    });
    expect(counts).toMatchObject({ claimed: 250, succeeded: 250, failed: 0 });

    expect(calls.reduce((sum, call) => sum + call.messages, 0)).toBe(250);
    expect(Math.max(...calls.map((call) => call.messages))).toBeLessThanOrEqual(QUEUE_LIMITS.messagesPerBatch);
    expect(Math.max(...calls.map((call) => call.bytes))).toBeLessThanOrEqual(QUEUE_LIMITS.bytesPerBatch);
    // 10 x 100 KB need at least 5 calls by bytes alone.
    expect(calls.length).toBeGreaterThanOrEqual(5);

    const kept = await consumed(ids, 250);
    expect(new Set(kept.map((message) => message.body.id))).toEqual(ids);
    expect(kept.every((message) => message.queue === 'skiplock-test-queue')).toBe(true);
    const first = enqueued[0]!.job;
    expect(kept.find((message) => message.body.id === first.id)!.body).toMatchObject({
      type,
      queue: 'outbox',
      tenant: 't0',
      attempt: 1,
      payload: { n: 0, blob },
    });
    const results = await Promise.all(
      enqueued.map(async ({ job }) => (await jobById(job.id)).result as { sentWith: number }),
    );
    expect(results.every((result) => result.sentWith >= 1 && result.sentWith <= QUEUE_LIMITS.messagesPerBatch)).toBe(
      true,
    );
  });

  it('fails for good a job too large for a message, and retries the jobs of a failed sendBatch', async () => {
    const type = uniqueName('to-queue');
    let calls = 0;
    const flaky = {
      sendBatch(messages: Iterable<{ body: unknown }>) {
        calls += 1;
        if (calls === 1) return Promise.reject(new Error('queue unavailable'));
        return env.TEST_QUEUE.sendBatch([...messages]);
      },
    };
    const toQueue = defineCloudflareQueueDelivery(type, z.object({ n: z.number(), blob: z.string().optional() }), {
      queue: flaky,
      backoff: { baseSeconds: 0.05, maxSeconds: 0.1 },
    });
    const enqueued = await enqueueBatch(httpDatabase(env), [
      { queue: 'outbox', type, payload: { n: 1 } },
      { queue: 'outbox', type, payload: { n: 2, blob: 'y'.repeat(QUEUE_LIMITS.bytesPerMessage) } },
    ]);
    const [small, large] = enqueued.map(({ job }) => job.id) as [string, string];

    for (let round = 0; round < 20 && (await jobById(small)).status !== 'succeeded'; round++) {
      await drainOnce(httpDatabase(env), createRegistry([toQueue]), {
        budgetSeconds: 25,
        concurrency: 10,
        housekeeping: false,
        logger: quiet,
      });
      await sleep(100);
    }

    expect(await jobById(large)).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { message: expect.stringContaining('takes up to 131072') },
    });
    expect(await jobById(small)).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect((await consumed(new Set([small, large]), 1)).map((message) => message.body.payload.n)).toEqual([1]);
  });
});

describe('a queue delivered to a Cloudflare queue, set over the API of the Worker', () => {
  it('refuses a binding the Worker does not have, changing nothing; with TEST_QUEUE, its drains send every job there', async () => {
    const api = client();
    const queue = uniqueName('events');
    const put = (delivery: unknown) =>
      request(`/v1/queues/${queue}`, {
        method: 'PUT',
        apiKey: ADMIN_TOKEN,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ delivery }),
      });

    const missing = await problemOf(await put({ target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_MISSING' }));
    expect(missing).toMatchObject({ status: 400, errors: [{ path: 'delivery.binding' }] });
    expect(missing.detail).toContain('no Queues producer binding named DELIVERY_QUEUE_MISSING');
    expect(await success(api.v1.queues[':queue'].$get({ param: { queue } }))).toMatchObject({
      delivery: null,
      custom: false,
    });

    // TEST_QUEUE is bound too, but not under a name the API may reach.
    expect(await problemOf(await put({ target: 'cloudflare-queue', binding: 'TEST_QUEUE' }))).toMatchObject({
      errors: [{ path: 'delivery.binding' }],
    });
    const target = { target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_TEST', batchSize: 50 };
    const set = await put(target);
    expect(set.status).toBe(200);
    expect(await set.json()).toMatchObject({ name: queue, delivery: target });

    // Types no handler of this Worker runs: the queue's target takes them all. Enqueued straight into the database
    // and drained here, by the Worker's own drain, so no fast path runs on in the background of this file.
    const jobs = Array.from({ length: 120 }, (_, n) => ({
      queue,
      type: n % 2 === 0 ? 'order.created' : 'order.paid',
      payload: { n },
    }));
    const ids = new Set((await enqueueBatch(httpDatabase(env), jobs)).map(({ job }) => job.id));
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      await scheduledDrain(drainRuntime({ WORKERS_PLAN: 'paid' }), '* * * * *');
      const states = await Promise.all([...ids].map(async (id) => (await jobById(id)).status));
      if (states.every((status) => status === 'succeeded')) break;
    }

    const kept = await consumed(ids, 120);
    expect(new Set(kept.map((message) => message.body.id))).toEqual(ids);
    expect(kept.every((message) => message.body.queue === queue)).toBe(true);
    expect(new Set(kept.map((message) => message.body.type))).toEqual(new Set(['order.created', 'order.paid']));
    for (const id of ids)
      expect(await jobById(id)).toMatchObject({ status: 'succeeded', result: { sentWith: expect.any(Number) } });
  });
});
