import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineWebhookDelivery, httpEndpointSecret, type DeliveredJob } from '../../src/drain';
import type { Db } from '../../src/db/types';
import { enqueueBatch, getJobEvents, listJobs, type Job } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { drain } from './support/drain';
import { startReceiver, type Answer, type Received } from './support/receiver';

const open = engineDatabases();
const receivers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

/** The receiver's endpoint secret, as Standard Webhooks gives one out. */
const SECRET = `whsec_${Buffer.from('a receiver secret of the bulk delivery tests').toString('base64')}`;
const QUICK_RETRIES = { baseSeconds: 0.05, maxSeconds: 0.1 };

async function receiver(answer: (request: Received, earlier: readonly Received[]) => Answer) {
  const started = await startReceiver(answer);
  receivers.push(started);
  return started;
}

interface Delivery {
  type: string;
  timestamp: string;
  data: { jobs: DeliveredJob<{ n: number }>[] };
}
const deliveryOf = (request: Received) => JSON.parse(request.body) as Delivery;

/** Drains until no job waits or runs (retries come due after their backoff). */
async function drainUntilSettled(db: Db, jobs: Parameters<typeof drain>[1]): Promise<Job[]> {
  for (let round = 0; round < 50; round++) {
    await drain(db, jobs, { concurrency: 50 });
    const { jobs: all } = await listJobs(db, { limit: 500 });
    if (all.every((job) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(job.status))) return all;
    await sleep(50);
  }
  throw new Error('the jobs did not settle');
}

describe('bulk delivery to a webhook', () => {
  it('posts a claim in one signed POST, in enqueue order; a rejected job alone retries, a failed POST retries its batch', async () => {
    const { db } = await open('pg');
    const target = await receiver((request, earlier): Answer => {
      if (earlier.length === 0) return { status: 503, headers: { 'retry-after': '1' } };
      if (earlier.length === 1) {
        const rejected = deliveryOf(request).data.jobs[0]!.id;
        return {
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ rejected: [{ id: rejected, error: 'busy' }] }),
        };
      }
      return { status: 204 };
    });
    const forward = defineWebhookDelivery('forward', z.object({ n: z.number() }), {
      url: `${target.base}/jobs`,
      secret: SECRET,
      backoff: QUICK_RETRIES,
    });
    const enqueued = (
      await enqueueBatch(
        db,
        Array.from({ length: 30 }, (_, n) => ({ queue: 'outbox', type: 'forward', tenant: 'acme', payload: { n } })),
      )
    ).map((enqueue) => enqueue.job);

    const settled = await drainUntilSettled(db, [forward]);

    const verifier = new Webhook(SECRET);
    for (const request of target.received) {
      expect(request.path).toBe('/jobs');
      expect(() => verifier.verify(request.body, request.headers as Record<string, string>)).not.toThrow();
      const { type, data } = deliveryOf(request);
      expect(type).toBe('skiplock.jobs');
      const ids = data.jobs.map((job) => job.id);
      expect(ids).toEqual([...ids].sort());
    }
    // The first claim took every job: one POST of all 30, in enqueue order, refused with a 503.
    const [first, second, ...later] = target.received.map(deliveryOf);
    expect(first!.data.jobs.map((job) => job.payload.n)).toEqual(enqueued.map((_, n) => n));
    expect(first!.data.jobs[1]).toMatchObject({
      id: enqueued[1]!.id,
      type: 'forward',
      queue: 'outbox',
      tenant: 'acme',
      attempt: 1,
      payload: { n: 1 },
    });
    // Every job went again; the POST after the 503 turned its first job away; that one alone went a third time.
    const retried = [second!, ...later].flatMap((delivery) => delivery.data.jobs);
    const rejected = second!.data.jobs[0]!;
    expect(
      retried
        .filter((job) => job.attempt === 2)
        .map((job) => job.id)
        .sort(),
    ).toEqual(enqueued.map((job) => job.id).sort());
    expect(retried.filter((job) => job.attempt === 3).map((job) => job.id)).toEqual([rejected.id]);
    expect(retried).toHaveLength(31);

    expect(settled.every((job) => job.status === 'succeeded')).toBe(true);
    const rejectedJob = settled.find((job) => job.id === rejected.id)!;
    expect(rejectedJob).toMatchObject({ attempts: 3, result: { status: 204 } });
    expect(settled.filter((job) => job.id !== rejected.id).every((job) => job.attempts === 2)).toBe(true);
    const failures = (await getJobEvents(db, rejected.id)).filter((event) => event.kind === 'failed');
    expect(failures.map((event) => JSON.stringify(event.detail))).toEqual([
      expect.stringContaining('answered 503'),
      expect.stringContaining('rejected the job: busy'),
    ]);
  });

  it('fails the batch when the receiver rejects a job it was not sent; a 4xx to a POST of several retries each alone, then fails it for good', async () => {
    const { db } = await open('pg');
    const stranger = await receiver(() => ({
      status: 200,
      body: JSON.stringify({ rejected: [{ id: crypto.randomUUID() }] }),
    }));
    const refusing = await receiver(() => ({ status: 422 }));
    const confused = defineWebhookDelivery('confused', z.unknown(), { url: stranger.base, batchSize: 10 });
    const refused = defineWebhookDelivery('refused', z.unknown(), { url: refusing.base, backoff: QUICK_RETRIES });
    await enqueueBatch(db, [
      ...Array.from({ length: 3 }, () => ({ queue: 'outbox', type: 'confused', maxAttempts: 1 })),
      ...Array.from({ length: 2 }, () => ({ queue: 'outbox', type: 'refused', maxAttempts: 5 })),
    ]);

    const settled = await drainUntilSettled(db, [confused, refused]);

    expect(settled.map((job) => [job.type, job.status, job.attempts])).toEqual(
      expect.arrayContaining([
        ['confused', 'failed', 1],
        ['refused', 'failed', 2],
      ]),
    );
    expect(settled.find((job) => job.type === 'confused')!.lastError).toMatchObject({
      message: expect.stringContaining('rejected jobs it was not sent'),
    });
    const refusedJobs = settled.filter((job) => job.type === 'refused');
    expect(refusedJobs.map((job) => job.lastError)).toEqual([
      { name: 'PermanentError', message: expect.stringContaining('answered 422') },
      { name: 'PermanentError', message: expect.stringContaining('answered 422') },
    ]);
    const firstFailures = await Promise.all(
      refusedJobs.map(async (job) => (await getJobEvents(db, job.id)).find((event) => event.kind === 'failed')),
    );
    expect(firstFailures.map((event) => event?.detail)).toEqual([
      expect.objectContaining({ error: expect.objectContaining({ name: 'BatchRefusedError' }) }),
      expect.objectContaining({ error: expect.objectContaining({ name: 'BatchRefusedError' }) }),
    ]);
    expect(stranger.received).toHaveLength(1);
    expect(refusing.received.map((request) => deliveryOf(request).data.jobs.length)).toEqual([2, 1, 1]);
  });

  it("puts each tenant's jobs in POSTs of their own, under maxBatchBytes: one tenant's refused POST neither fails nor shows in another's jobs", async () => {
    const { db } = await open('pg');
    const signingSecret = 'a signing secret of the bulk delivery tests, 32+ characters';
    // A receiver that refuses a POST over 600 KB, echoing the start of what it got.
    const target = await receiver((request) =>
      request.body.length > 600_000 ? { status: 413, body: request.body.slice(0, 300) } : { status: 204 },
    );
    const forward = defineWebhookDelivery('forward', z.unknown(), {
      url: `${target.base}/jobs`,
      signingSecret,
      maxBatchBytes: 4 * 1024 * 1024,
      backoff: QUICK_RETRIES,
    });
    const big = 'x'.repeat(250_000);
    const enqueued = await enqueueBatch(db, [
      ...Array.from({ length: 5 }, (_, n) => ({
        queue: 'outbox',
        type: 'forward',
        tenant: 'acme',
        payload: { big, n },
      })),
      { queue: 'outbox', type: 'forward', tenant: 'globex', payload: { small: true } },
    ]);
    const globexId = enqueued[5]!.job.id;

    const settled = await drainUntilSettled(db, [forward]);

    const posts = target.received.map((request) => ({ request, delivery: deliveryOf(request) }));
    for (const { request, delivery } of posts) {
      const tenants = new Set(delivery.data.jobs.map((job) => job.tenant));
      expect(tenants.size).toBe(1);
      const [tenant] = tenants;
      expect(request.headers['skiplock-tenant']).toBe(tenant);
      // Signed for its tenant and this URL; another tenant's endpoint secret does not verify it.
      const own = new Webhook(await httpEndpointSecret(signingSecret, { tenant: tenant!, url: `${target.base}/jobs` }));
      const other = new Webhook(
        await httpEndpointSecret(signingSecret, {
          tenant: tenant === 'acme' ? 'globex' : 'acme',
          url: `${target.base}/jobs`,
        }),
      );
      expect(() => own.verify(request.body, request.headers as Record<string, string>)).not.toThrow();
      expect(() => other.verify(request.body, request.headers as Record<string, string>)).toThrow();
    }
    // globex's job went alone, once, and succeeded; nothing of acme's is in it.
    const globex = settled.find((job) => job.id === globexId)!;
    expect(globex).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(JSON.stringify(await getJobEvents(db, globexId))).not.toContain('acme');
    // acme's five went in one POST, refused with a 413, then each alone and delivered.
    const acmeSizes = posts
      .filter(({ delivery }) => delivery.data.jobs[0]!.tenant === 'acme')
      .map(({ delivery }) => delivery.data.jobs.length);
    expect(acmeSizes).toEqual([5, 1, 1, 1, 1, 1]);
    expect(settled.filter((job) => job.tenant === 'acme').map((job) => [job.status, job.attempts])).toEqual(
      Array(5).fill(['succeeded', 2]),
    );
  });

  it('keeps a POST under maxBatchBytes, a job larger than it alone', async () => {
    const { db } = await open('pg');
    const target = await receiver(() => ({ status: 204 }));
    const forward = defineWebhookDelivery('forward', z.unknown(), { url: target.base, maxBatchBytes: 2048 });
    await enqueueBatch(db, [
      ...Array.from({ length: 6 }, () => ({ queue: 'outbox', type: 'forward', payload: 'y'.repeat(600) })),
      { queue: 'outbox', type: 'forward', payload: 'z'.repeat(5000) },
    ]);

    await drainUntilSettled(db, [forward]);

    const sizes = target.received.map((request) => deliveryOf(request).data.jobs.length).sort();
    expect(sizes).toEqual([1, 2, 2, 2]);
  });

  it('refuses a target it could not deliver to when defined', () => {
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'ftp://example.com/jobs' })).toThrow(
      'url must be http or https',
    );
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'not a url' })).toThrow();
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'https://example.com', secret: 'plain-text' })).toThrow(
      'whsec_',
    );
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'https://example.com', batchSize: 0 })).toThrow(
      'batchSize',
    );
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'https://example.com', maxBatchBytes: 10 })).toThrow(
      'maxBatchBytes',
    );
    expect(() =>
      defineWebhookDelivery('x', z.unknown(), {
        url: 'https://example.com',
        secret: SECRET,
        signingSecret: 'y'.repeat(32),
      }),
    ).toThrow('secret or signingSecret');
  });
});
