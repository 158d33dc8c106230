import { describe, expect, it } from 'vitest';
import {
  claimBatch,
  completeMany,
  enqueueBatch,
  getQueue,
  pauseQueue,
  resumeQueue,
  setQueue,
  setTenant,
} from '../../src/engine';
import { nextDueAt } from '../../src/engine/next-due';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const worker = 'w';

describe('queues within a tenant', () => {
  it("serves a tenant's queue of 10 jobs among the first claims while its other queue has 5,000 waiting", async () => {
    const { db } = await open('pg');
    for (let i = 0; i < 5; i++) {
      await enqueueBatch(
        db,
        Array.from({ length: 1000 }, () => ({ queue: 'bulk', tenant: 'acme' })),
      );
    }
    // Enqueued last and at a lower priority: in one claim order they would wait for all 5,000.
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, () => ({ queue: 'mail', tenant: 'acme', priority: -1 })),
    );
    // With a batch the turns are exact: the small queue fills half of it.
    const batch = await claimBatch(db, { max: 4, workerId: worker });
    expect(batch.map((job) => job.queue).sort()).toEqual(['bulk', 'bulk', 'mail', 'mail']);
    await completeMany(db, batch);
    // One job per claim, completed at once (no running load to compare): the queues take turns at random.
    const order: string[] = [];
    for (let i = 0; i < 40; i++) {
      const jobs = await claimBatch(db, { max: 1, workerId: worker });
      order.push(jobs[0]!.queue);
      await completeMany(db, jobs);
    }
    expect(order.filter((queue) => queue === 'mail')).toHaveLength(8);
  });

  it('gives queues turns in proportion to their weight, and keeps priority order within a queue', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'urgent', { concurrency: null, weight: 3 });
    await enqueueBatch(db, [
      ...Array.from({ length: 50 }, (_, i) => ({ queue: 'urgent', tenant: 'acme', payload: i, priority: i % 2 })),
      ...Array.from({ length: 50 }, () => ({ queue: 'routine', tenant: 'acme' })),
    ]);
    const batch = await claimBatch(db, { max: 20, workerId: worker });
    const urgent = batch.filter((job) => job.queue === 'urgent');
    expect(urgent).toHaveLength(15);
    expect(batch.filter((job) => job.queue === 'routine')).toHaveLength(5);
    // The 15 urgent ones: the 25 of priority 1 come first, in enqueue order.
    expect(urgent.map((job) => job.priority)).toEqual(Array(15).fill(1));
    expect(urgent.map((job) => job.payload)).toEqual(Array.from({ length: 15 }, (_, i) => 2 * i + 1));
  });

  it('shares between tenants first, then between each tenant’s queues', async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, [
      ...Array.from({ length: 30 }, () => ({ queue: 'a', tenant: 'one' })),
      ...Array.from({ length: 30 }, () => ({ queue: 'b', tenant: 'one' })),
      ...Array.from({ length: 30 }, () => ({ queue: 'a', tenant: 'two' })),
    ]);
    const batch = await claimBatch(db, { max: 12, workerId: worker });
    const count = (tenant: string, queue: string) =>
      batch.filter((job) => job.tenant === tenant && job.queue === queue).length;
    expect([count('one', 'a'), count('one', 'b'), count('two', 'a')]).toEqual([3, 3, 6]);
  });
});

describe('a queue’s concurrency cap', () => {
  it('never starts more than the cap over all tenants, and frees a slot when a job ends', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'pdf', { concurrency: 3, weight: 1 });
    await enqueueBatch(db, [
      ...Array.from({ length: 5 }, () => ({ queue: 'pdf', tenant: 'one' })),
      ...Array.from({ length: 5 }, () => ({ queue: 'pdf', tenant: 'two' })),
      ...Array.from({ length: 5 }, () => ({ queue: 'mail', tenant: 'one' })),
    ]);
    const first = await claimBatch(db, { max: 20, workerId: worker });
    expect(first.filter((job) => job.queue === 'pdf')).toHaveLength(3);
    // The cap is the queue's: the same tenant's other queue is not held back.
    expect(first.filter((job) => job.queue === 'mail')).toHaveLength(5);
    expect(await claimBatch(db, { max: 20, workerId: worker })).toEqual([]);
    await completeMany(db, first.filter((job) => job.queue === 'pdf').slice(0, 2));
    expect(await claimBatch(db, { max: 20, workerId: worker })).toHaveLength(2);
    expect(await getQueue(db, 'pdf')).toEqual({
      name: 'pdf',
      concurrency: 3,
      weight: 1,
      delivery: null,
      pausedAt: null,
      retentionSeconds: null,
      deadLetterQueue: null,
      rateLimit: null,
      custom: true,
      running: 3,
      startsInWindow: null,
    });
    // A tenant-bound reader counts its own tenant's running jobs.
    const perTenant = await Promise.all(['one', 'two'].map((tenant) => getQueue(db, 'pdf', { tenant })));
    expect(perTenant[0]!.running + perTenant[1]!.running).toBe(3);
    expect(perTenant[0]!.running).toBe(
      (
        await db.query<{ n: number }>({
          text: "SELECT count(*)::int AS n FROM skiplock.jobs WHERE queue = 'pdf' AND tenant = 'one' AND state = 'running'",
          params: [],
        })
      )[0]!.n,
    );
  });

  it('holds for a pull worker claiming one queue of one tenant, and together with a tenant limit', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'pdf', { concurrency: 2, weight: 1 });
    await setTenant(db, 'one', { concurrency: 1, rateLimit: null, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 5 }, () => ({ queue: 'pdf', tenant: 'two' })),
    );
    expect(await claimBatch(db, { max: 5, workerId: worker, queues: ['pdf'], tenant: 'two' })).toHaveLength(2);
    await setQueue(db, 'pdf', { concurrency: 5, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 5 }, () => ({ queue: 'pdf', tenant: 'one' })),
    );
    const next = await claimBatch(db, { max: 10, workerId: worker });
    expect(next.filter((job) => job.tenant === 'one')).toHaveLength(1);
    expect(next.filter((job) => job.tenant === 'two')).toHaveLength(2);
  });

  it('a cap of 0 pauses the queue; the defaults come back as no cap and weight 1', async () => {
    const { db } = await open('pg');
    expect(await getQueue(db, 'reports')).toEqual({
      name: 'reports',
      concurrency: null,
      weight: 1,
      delivery: null,
      pausedAt: null,
      retentionSeconds: null,
      deadLetterQueue: null,
      rateLimit: null,
      custom: false,
      running: 0,
      startsInWindow: null,
    });
    await setQueue(db, 'reports', { concurrency: 0, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'reports' })),
    );
    expect(await claimBatch(db, { max: 3, workerId: worker })).toEqual([]);
    await setQueue(db, 'reports', { concurrency: null, weight: 1 });
    expect(await claimBatch(db, { max: 3, workerId: worker })).toHaveLength(3);
  });

  it('pauses a queue, alone or beside others, keeping its waiting jobs and its cap, and resumes it', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'reports', { concurrency: 2, weight: 3 });
    await enqueueBatch(db, [{ queue: 'reports', tenant: 'acme' }]);
    const [running] = await claimBatch(db, { max: 1, workerId: worker });
    await enqueueBatch(
      db,
      Array.from({ length: 4 }, (_, i) => ({ queue: 'reports', tenant: i % 2 === 0 ? 'acme' : 'globex' })),
    );

    const paused = await pauseQueue(db, 'reports');
    expect(paused).toMatchObject({ concurrency: 2, weight: 3, running: 1, pausedAt: expect.any(String) });
    expect(await pauseQueue(db, 'reports')).toMatchObject({ pausedAt: paused.pausedAt });
    // Its only tenant's queue (the claim of one group), and then beside another queue (the claim of several).
    expect(await claimBatch(db, { max: 5, workerId: worker, tenant: 'globex' })).toEqual([]);
    expect(await claimBatch(db, { max: 5, workerId: worker })).toEqual([]);
    await enqueueBatch(db, [{ queue: 'mail', tenant: 'acme' }]);
    expect((await claimBatch(db, { max: 5, workerId: worker })).map((job) => job.queue)).toEqual(['mail']);
    // A job running when the queue was paused ends as usual.
    expect((await completeMany(db, [running!])).completed).toEqual([running!.id]);
    // Its ready jobs do not make a drain due.
    expect((await nextDueAt(db, { types: ['reports'], retentionSeconds: 86_400 })).getTime()).toBeGreaterThan(
      Date.now(),
    );

    expect(await resumeQueue(db, 'reports')).toMatchObject({ concurrency: 2, weight: 3, pausedAt: null });
    const resumed = await claimBatch(db, { max: 5, workerId: worker });
    expect(resumed.map((job) => job.queue)).toEqual(['reports', 'reports']);
  });

  it('refuses invalid settings in the database itself', async () => {
    const { db } = await open('pg');
    await expect(setQueue(db, 'q', { concurrency: -1, weight: 1 })).rejects.toMatchObject({ code: '23514' });
    await expect(setQueue(db, 'q', { concurrency: 1, weight: 1001 })).rejects.toMatchObject({ code: '23514' });
    await expect(setQueue(db, '', { concurrency: 1, weight: 1 })).rejects.toMatchObject({ code: '23514' });
    expect(await getQueue(db, 'q')).toMatchObject({ custom: false });
  });
});
