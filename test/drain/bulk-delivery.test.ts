import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineWebhookDelivery, type DeliveredJob } from '../../src/drain';
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
        return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rejected: [{ id: rejected, error: 'busy' }] }) };
      }
      return { status: 204 };
    });
    const forward = defineWebhookDelivery('forward', z.object({ n: z.number() }), { url: `${target.base}/jobs`, secret: SECRET, backoff: QUICK_RETRIES });
    const enqueued = (
      await enqueueBatch(
        db,
        Array.from({ length: 30 }, (_, n) => ({ queue: 'outbox', type: 'forward', tenant: n % 2 === 0 ? 'acme' : 'globex', payload: { n } })),
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
    expect(first!.data.jobs[1]).toMatchObject({ id: enqueued[1]!.id, type: 'forward', queue: 'outbox', tenant: 'globex', attempt: 1, payload: { n: 1 } });
    // Every job went again; the POST after the 503 turned its first job away; that one alone went a third time.
    const retried = [second!, ...later].flatMap((delivery) => delivery.data.jobs);
    const rejected = second!.data.jobs[0]!;
    expect(retried.filter((job) => job.attempt === 2).map((job) => job.id).sort()).toEqual(enqueued.map((job) => job.id).sort());
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

  it('fails the batch when the receiver rejects a job it was not sent, and for good on a 4xx', async () => {
    const { db } = await open('pg');
    const stranger = await receiver(() => ({ status: 200, body: JSON.stringify({ rejected: [{ id: crypto.randomUUID() }] }) }));
    const refusing = await receiver(() => ({ status: 422 }));
    const confused = defineWebhookDelivery('confused', z.unknown(), { url: stranger.base, batchSize: 10 });
    const refused = defineWebhookDelivery('refused', z.unknown(), { url: refusing.base });
    await enqueueBatch(db, [
      ...Array.from({ length: 3 }, () => ({ queue: 'outbox', type: 'confused', maxAttempts: 1 })),
      ...Array.from({ length: 2 }, () => ({ queue: 'outbox', type: 'refused', maxAttempts: 5 })),
    ]);

    const settled = await drainUntilSettled(db, [confused, refused]);

    expect(settled.map((job) => [job.type, job.status, job.attempts])).toEqual(
      expect.arrayContaining([['confused', 'failed', 1], ['refused', 'failed', 1]]),
    );
    expect(settled.find((job) => job.type === 'confused')!.lastError).toMatchObject({ message: expect.stringContaining('rejected jobs it was not sent') });
    expect(settled.find((job) => job.type === 'refused')!.lastError).toMatchObject({ message: expect.stringContaining('answered 422') });
    expect(stranger.received).toHaveLength(1);
    expect(refusing.received).toHaveLength(1);
  });

  it('refuses a target it could not deliver to when defined', () => {
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'ftp://example.com/jobs' })).toThrow('url must be http or https');
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'not a url' })).toThrow();
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'https://example.com', secret: 'plain-text' })).toThrow('whsec_');
    expect(() => defineWebhookDelivery('x', z.unknown(), { url: 'https://example.com', batchSize: 0 })).toThrow('batchSize');
  });
});
