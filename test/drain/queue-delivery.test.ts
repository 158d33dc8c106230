import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob, httpEndpointSecret, QueueDeliveries, type DeliveredJob } from '../../src/drain';
import { enqueueBatch, getJobEvents, listJobs, setQueue, type EnqueueResult } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from './support/drain';
import { startReceiver, type Answer, type Received } from './support/receiver';

const open = engineDatabases();
const receivers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

const SECRET = `whsec_${Buffer.from('the receiver secret of the queue delivery tests').toString('base64')}`;

async function receiver(answer: (request: Received) => Answer = () => ({ status: 204 })) {
  const started = await startReceiver(answer);
  receivers.push(started);
  return started;
}

/** A runtime's delivery targets: the receiver's address allowed, the secret under DELIVERY_SECRET_ORDERS. */
function deliveriesTo(port: number, secrets: Record<string, string> = { DELIVERY_SECRET_ORDERS: SECRET }) {
  return new QueueDeliveries({ http: { allowedHosts: [`127.0.0.1:${port}`] }, secret: (name) => secrets[name] });
}

const deliveredIn = (request: Received) => (JSON.parse(request.body) as { data: { jobs: DeliveredJob[] } }).data.jobs;

describe('a queue delivered to a webhook, set over the API', () => {
  it('posts its jobs of every type in signed batches, never to their handlers; the other queues’ jobs run as before', async () => {
    const { db } = await open('pg');
    const target = await receiver();
    let handled = 0;
    const email = defineJob('email', z.object({ to: z.string() }), () => {
      handled += 1;
    });
    await setQueue(db, 'orders-out', {
      concurrency: null,
      weight: 1,
      delivery: {
        target: 'webhook',
        url: `${target.base}/orders`,
        secretName: 'DELIVERY_SECRET_ORDERS',
        batchSize: 20,
      },
    });
    await enqueueBatch(db, [
      ...Array.from({ length: 30 }, (_, n) => ({
        queue: 'orders-out',
        type: 'order.created',
        tenant: `t${n % 3}`,
        payload: { n },
      })),
      ...Array.from({ length: 10 }, () => ({ queue: 'orders-out', type: 'email', payload: { to: 'a@example.com' } })),
      ...Array.from({ length: 5 }, () => ({ queue: 'mail', type: 'email', payload: { to: 'b@example.com' } })),
    ]);

    const counts = await drain(db, [email], { concurrency: 50, deliveries: deliveriesTo(target.port) });
    expect(counts).toMatchObject({ claimed: 45, succeeded: 45, failed: 0 });
    expect(handled).toBe(5);

    // Each POST holds one tenant's jobs, signed with that tenant's endpoint secret for this URL.
    const secretOf = (tenant: string) => httpEndpointSecret(SECRET, { tenant, url: `${target.base}/orders` });
    const posted: DeliveredJob[] = [];
    for (const request of target.received) {
      const jobs = deliveredIn(request);
      const tenant = jobs[0]!.tenant;
      expect(request.path).toBe('/orders');
      expect(new Set(jobs.map((job) => job.tenant))).toEqual(new Set([tenant]));
      expect(() => new Webhook(SECRET).verify(request.body, request.headers as Record<string, string>)).toThrow();
      const verifier = new Webhook(await secretOf(tenant));
      expect(() => verifier.verify(request.body, request.headers as Record<string, string>)).not.toThrow();
      expect(jobs.length).toBeLessThanOrEqual(20);
      posted.push(...jobs);
    }
    expect(posted).toHaveLength(40);
    expect(new Set(posted.map((job) => job.type))).toEqual(new Set(['order.created', 'email']));
    expect(posted.every((job) => job.queue === 'orders-out')).toBe(true);
    const { jobs } = await listJobs(db, { queue: 'orders-out', limit: 100 });
    expect(jobs.every((job) => job.status === 'succeeded' && (job.result as { status: number }).status === 204)).toBe(
      true,
    );
  });

  it('a target the runtime cannot reach any more fails each attempt with the reason, and delivers once it can', async () => {
    const { db } = await open('pg');
    const target = await receiver();
    await setQueue(db, 'orders-out', {
      concurrency: null,
      weight: 1,
      delivery: { target: 'webhook', url: `${target.base}/orders`, secretName: 'DELIVERY_SECRET_ORDERS' },
    });
    const [{ job }] = (await enqueueBatch(db, [
      { queue: 'orders-out', type: 'order.created', payload: { n: 1 }, maxAttempts: 3 },
    ])) as [EnqueueResult];

    // The secret is gone from this runtime's environment: nothing is sent unsigned.
    await drain(db, [], { deliveries: deliveriesTo(target.port, {}) });
    const failed = await jobById(db, job.id);
    expect(failed.status).toBe('retrying');
    expect(JSON.stringify(failed.lastError)).toContain('no secret named DELIVERY_SECRET_ORDERS');
    expect(target.received).toHaveLength(0);

    await db.query({ text: `UPDATE skiplock.jobs SET run_at = now() WHERE id = $1`, params: [job.id] });
    await drain(db, [], { deliveries: deliveriesTo(target.port) });
    expect((await jobById(db, job.id)).status).toBe('succeeded');
    expect(target.received).toHaveLength(1);
    expect((await getJobEvents(db, job.id)).map((event) => event.kind)).toContain('failed');
  });

  it('a drain without delivery targets, or one that cannot reach the queue’s, leaves the queue’s jobs waiting', async () => {
    const { db } = await open('pg');
    const target = await receiver();
    await setQueue(db, 'events', {
      concurrency: null,
      weight: 1,
      delivery: { target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_EVENTS' },
    });
    const noop = defineJob('noop', z.unknown(), () => undefined);
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'events', type: 'noop' })),
    );

    // A Node worker's deliveries reach webhooks only.
    const nodeDeliveries = deliveriesTo(target.port);
    expect(nodeDeliveries.targets).toEqual(['webhook']);
    expect(nodeDeliveries.problemWith({ target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_EVENTS' })).toMatchObject({
      field: 'target',
    });
    expect(await drain(db, [noop], { deliveries: nodeDeliveries })).toMatchObject({ claimed: 0 });
    expect(await drain(db, [noop])).toMatchObject({ claimed: 0 });
    const { jobs } = await listJobs(db, { queue: 'events', limit: 10 });
    expect(jobs.map((job) => job.status)).toEqual(['queued', 'queued', 'queued']);
  });

  it('refuses, naming the field, a URL off the allow-list, a private address, a secret not named for it or shorter than 32 characters', () => {
    const secrets: Record<string, string> = {
      DELIVERY_SECRET_GOOD: SECRET,
      DELIVERY_SECRET_PLAIN: 'short-signing-secret',
      OTHER_SECRET: SECRET,
    };
    const deliveries = new QueueDeliveries({
      http: { allowedHosts: ['hooks.example.com', 'acme=acme.example.com'] },
      secret: (name) => secrets[name],
      producer: () => ({ sendBatch: async () => undefined }),
    });
    const webhook = (url: string, secretName?: string) =>
      deliveries.problemWith({ target: 'webhook', url, ...(secretName ? { secretName } : {}) });
    expect(webhook('https://hooks.example.com/in', 'DELIVERY_SECRET_GOOD')).toBeUndefined();
    expect(webhook('https://elsewhere.example.com/in')).toEqual({
      field: 'url',
      detail: 'host elsewhere.example.com is not on HTTP_ALLOWED_HOSTS for every tenant',
    });
    // An entry for one tenant does not cover a queue that carries every tenant's jobs.
    expect(webhook('https://acme.example.com/in')?.field).toBe('url');
    expect(webhook('http://10.0.0.8/in')?.detail).toMatch(/not a public address/);
    expect(webhook('https://hooks.example.com/in', 'DELIVERY_SECRET_MISSING')).toEqual({
      field: 'secretName',
      detail: 'no secret named DELIVERY_SECRET_MISSING is set here',
    });
    expect(webhook('https://hooks.example.com/in', 'DELIVERY_SECRET_PLAIN')?.field).toBe('secretName');
    // A secret kept for something else is out of reach, set or not.
    expect(webhook('https://hooks.example.com/in', 'OTHER_SECRET')).toEqual({
      field: 'secretName',
      detail: 'must start with DELIVERY_SECRET_',
    });
    expect(deliveries.problemWith({ target: 'cloudflare-queue', binding: 'JOBS' })).toEqual({
      field: 'binding',
      detail: 'must start with DELIVERY_QUEUE_',
    });
    expect(deliveries.problemWith({ target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_JOBS' })).toBeUndefined();
  });

  it('a target written in SQL with a setting out of range fails the attempts with the reason; the drain goes on', async () => {
    const { db } = await open('pg');
    const target = await receiver();
    await db.query({
      text: `INSERT INTO skiplock.queues (name, delivery) VALUES ('orders-out', $1)`,
      params: [JSON.stringify({ target: 'webhook', url: `${target.base}/orders`, batchSize: 5000 })],
    });
    await enqueueBatch(db, [
      { queue: 'orders-out', type: 'order.created', maxAttempts: 1 },
      { queue: 'mail', type: 'email' },
    ]);
    const email = defineJob('email', z.unknown(), () => undefined);

    expect(await drain(db, [email], { deliveries: deliveriesTo(target.port) })).toMatchObject({
      claimed: 2,
      succeeded: 1,
      failed: 1,
    });
    const [failed] = (await listJobs(db, { queue: 'orders-out', limit: 1 })).jobs;
    expect((failed!.lastError as { message: string }).message).toBe(
      `queue orders-out's delivery target is not valid: job type "queue orders-out": batchSize must be a whole number from 1 to 1000`,
    );
    expect(target.received).toHaveLength(0);
  });
});
