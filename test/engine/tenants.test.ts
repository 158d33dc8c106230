import { describe, expect, it } from 'vitest';
import { claimBatch, completeMany, enqueueBatch, getTenant, setTenant, setTenantDefaults } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const worker = 'w';

describe('tenants', () => {
  it('serves a tenant with 10 jobs among the first claims while another has 5,000 waiting', async () => {
    const { db } = await open('pg');
    for (let i = 0; i < 5; i++) {
      await enqueueBatch(
        db,
        Array.from({ length: 1000 }, () => ({ queue: 'q', tenant: 'big' })),
      );
    }
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, () => ({ queue: 'q', tenant: 'small' })),
    );
    // One job per claim, completed at once: the hardest case for fairness (no running load to compare).
    const order: string[] = [];
    for (let i = 0; i < 40; i++) {
      const jobs = await claimBatch(db, { max: 1, workerId: worker });
      order.push(jobs[0]!.tenant);
      await completeMany(db, jobs);
    }
    expect(order.filter((t) => t === 'small').length).toBeGreaterThanOrEqual(5);
    // With batches, the round robin is exact: the small tenant fills half of the first batch.
    const batch = await claimBatch(db, { max: 10, workerId: worker });
    const small = batch.filter((job) => job.tenant === 'small').length;
    expect(small).toBe(Math.min(5, 10 - order.filter((t) => t === 'small').length));
  });

  it('gives turns in proportion to weight', async () => {
    const { db } = await open('pg');
    await setTenant(db, 'heavy', { concurrency: null, rateLimit: null, weight: 3 });
    await enqueueBatch(db, [
      ...Array.from({ length: 50 }, () => ({ queue: 'q', tenant: 'heavy' })),
      ...Array.from({ length: 50 }, () => ({ queue: 'q', tenant: 'light' })),
    ]);
    const batch = await claimBatch(db, { max: 20, workerId: worker });
    expect(batch.filter((job) => job.tenant === 'heavy')).toHaveLength(15);
    expect(batch.filter((job) => job.tenant === 'light')).toHaveLength(5);
  });

  it('never starts more than a tenant’s concurrency, and frees a slot when a job ends', async () => {
    const { db } = await open('pg');
    await setTenant(db, 'acme', { concurrency: 2, rateLimit: null, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 5 }, () => ({ queue: 'q', tenant: 'acme' })),
    );
    const first = await claimBatch(db, { max: 5, workerId: worker });
    expect(first).toHaveLength(2);
    expect(await claimBatch(db, { max: 5, workerId: worker })).toEqual([]);
    await completeMany(db, first.slice(0, 1));
    expect(await claimBatch(db, { max: 5, workerId: worker })).toHaveLength(1);
    expect(await getTenant(db, 'acme')).toEqual({
      name: 'acme',
      concurrency: 2,
      rateLimit: null,
      weight: 1,
      custom: true,
      running: 2,
    });
  });

  it('enforces a rate limit of jobs started per window', async () => {
    const { db } = await open('pg');
    await setTenant(db, 'metered', { concurrency: null, rateLimit: { count: 3, perSeconds: 3600 }, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, () => ({ queue: 'q', tenant: 'metered' })),
    );
    const first = await claimBatch(db, { max: 10, workerId: worker });
    expect(first).toHaveLength(3);
    await completeMany(db, first);
    expect(await claimBatch(db, { max: 10, workerId: worker })).toEqual([]);
    // Once the window has passed, the next three may start.
    await db.query({
      text: "UPDATE skiplock.tenants SET window_started_at = now() - interval '2 hours' WHERE name = 'metered'",
      params: [],
    });
    expect(await claimBatch(db, { max: 10, workerId: worker })).toHaveLength(3);
  });

  it('applies the defaults to tenants without settings of their own', async () => {
    const { db } = await open('pg');
    expect(await getTenant(db, 'nobody')).toMatchObject({
      concurrency: null,
      rateLimit: null,
      weight: 1,
      custom: false,
    });
    await setTenantDefaults(db, { concurrency: 1, rateLimit: null, weight: 1 });
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'q', tenant: 'newcomer' })),
    );
    expect(await claimBatch(db, { max: 3, workerId: worker })).toHaveLength(1);
    expect(await getTenant(db, 'newcomer')).toMatchObject({ concurrency: 1, custom: false, running: 1 });
  });

  it('refuses invalid settings in the database itself', async () => {
    const { db } = await open('pg');
    await expect(setTenant(db, 't', { concurrency: -1, rateLimit: null, weight: 1 })).rejects.toMatchObject({
      code: '23514',
    });
    await expect(setTenant(db, 't', { concurrency: 1, rateLimit: null, weight: 0 })).rejects.toMatchObject({
      code: '23514',
    });
  });
});
