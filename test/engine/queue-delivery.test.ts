import { describe, expect, it } from 'vitest';
import { claimBatch, completeMany, enqueueBatch, getQueue, setQueue, type DeliveryTarget } from '../../src/engine';
import { nextDueAt } from '../../src/engine/next-due';
import { readyBacklog } from '../../src/engine/ready-backlog';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const worker = 'w';
const WEEK = 7 * 24 * 3600;
const hook: DeliveryTarget = {
  target: 'webhook',
  url: 'https://hooks.example.com/in',
  secretName: 'HOOK_SECRET',
  batchSize: 50,
};

describe('a queue with a delivery target', () => {
  it('gives its jobs, of any type, only to a claimer that names its target, each with the target', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'outbox', { concurrency: null, weight: 1, delivery: hook });
    await enqueueBatch(db, [
      ...Array.from({ length: 3 }, () => ({ queue: 'outbox', type: 'email' })),
      ...Array.from({ length: 2 }, () => ({ queue: 'outbox', type: 'order.created' })),
    ]);
    // One queue of one tenant: the claim's plain path.
    expect(await claimBatch(db, { max: 10, workerId: worker, types: ['email'] })).toEqual([]);
    expect(await claimBatch(db, { max: 10, workerId: worker })).toEqual([]);
    expect(await claimBatch(db, { max: 10, workerId: worker, queues: ['outbox'] })).toEqual([]);
    expect(await claimBatch(db, { max: 10, workerId: worker, deliveryTargets: ['cloudflare-queue'] })).toEqual([]);

    const claimed = await claimBatch(db, { max: 10, workerId: worker, types: [], deliveryTargets: ['webhook'] });
    expect(claimed.map((job) => job.type).sort()).toEqual([
      'email',
      'email',
      'email',
      'order.created',
      'order.created',
    ]);
    for (const job of claimed) expect(job.delivery).toEqual(hook);
  });

  it('among other queues and tenants: handler jobs come without a target, the queue’s with it', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'outbox', { concurrency: null, weight: 1, delivery: hook });
    await enqueueBatch(db, [
      ...Array.from({ length: 4 }, (_, n) => ({ queue: 'outbox', type: 'email', tenant: `t${n % 2}` })),
      ...Array.from({ length: 4 }, (_, n) => ({ queue: 'mail', type: 'email', tenant: `t${n % 2}` })),
    ]);
    // Without the target, only the other queue's jobs, though the outbox holds jobs of the same type.
    const handlerJobs = await claimBatch(db, { max: 10, workerId: worker, types: ['email'] });
    expect(handlerJobs.map((job) => job.queue)).toEqual(['mail', 'mail', 'mail', 'mail']);
    expect(handlerJobs.every((job) => !('delivery' in job))).toBe(true);

    const delivered = await claimBatch(db, {
      max: 10,
      workerId: worker,
      types: ['email'],
      deliveryTargets: ['webhook', 'cloudflare-queue'],
    });
    expect(delivered).toHaveLength(4);
    expect(delivered.every((job) => job.queue === 'outbox' && job.delivery?.target === 'webhook')).toBe(true);
    await completeMany(db, [...handlerJobs, ...delivered]);
  });

  it('keeps a cap on a delivered queue, and hands its jobs back to handlers once the target is removed', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'outbox', {
      concurrency: 2,
      weight: 1,
      delivery: { target: 'cloudflare-queue', binding: 'EVENTS' },
    });
    await enqueueBatch(db, [
      ...Array.from({ length: 5 }, () => ({ queue: 'outbox', type: 'email', tenant: 'a' })),
      ...Array.from({ length: 5 }, () => ({ queue: 'other', type: 'email', tenant: 'b' })),
    ]);
    const first = await claimBatch(db, {
      max: 10,
      workerId: worker,
      types: ['email'],
      deliveryTargets: ['cloudflare-queue'],
    });
    expect(first.filter((job) => job.queue === 'outbox')).toHaveLength(2);
    expect(first.filter((job) => job.queue === 'other')).toHaveLength(5);

    await setQueue(db, 'outbox', { concurrency: null, weight: 1, delivery: null });
    expect(await getQueue(db, 'outbox')).toMatchObject({ delivery: null, custom: true });
    const rest = await claimBatch(db, { max: 10, workerId: worker, types: ['email'] });
    expect(rest.map((job) => job.queue)).toEqual(['outbox', 'outbox', 'outbox']);
    expect(rest.every((job) => job.delivery === undefined)).toBe(true);
  });

  it('counts as due and as backlog only for a drain that delivers to its target', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'outbox', { concurrency: null, weight: 1, delivery: hook });
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'outbox', type: 'order.created' })),
    );
    const tomorrow = async (targets: Array<DeliveryTarget['target']>) =>
      (await nextDueAt(db, { types: ['noop'], deliveryTargets: targets, retentionSeconds: WEEK })).getTime() >
      Date.now() + 60_000;
    expect(await tomorrow([])).toBe(true);
    expect(await tomorrow(['webhook'])).toBe(false);
    expect(await readyBacklog(db, { types: ['noop'], limit: 10 })).toBe(0);
    expect(await readyBacklog(db, { types: ['noop'], deliveryTargets: ['webhook'], limit: 10 })).toBe(3);
  });

  it('the database refuses a target it does not know', async () => {
    const { db } = await open('pg');
    await expect(
      db.query({ text: `INSERT INTO skiplock.queues (name, delivery) VALUES ('x', '{"target": "sqs"}')`, params: [] }),
    ).rejects.toThrow(/queues_delivery_check/);
    await expect(
      db.query({ text: `INSERT INTO skiplock.queues (name, delivery) VALUES ('x', '"webhook"')`, params: [] }),
    ).rejects.toThrow(/queues_delivery_check/);
  });
});
