import { describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  claimOne,
  client,
  createKey,
  enqueueJob,
  problemOf,
  request,
  success,
  uniqueName,
} from './support/api';

const api = client();

/** A job of its own queue and tenant, claimed, then completed (or failed for good). */
async function finishedJob(outcome: 'complete' | 'fail', tenant = uniqueName('tenant')) {
  const queue = uniqueName('finished');
  const { statusUrl } = await enqueueJob(queue, { tenant });
  const { id, leaseToken } = await claimOne(queue);
  if (outcome === 'complete')
    await success(api.v1.jobs[':id'].complete.$post({ param: { id }, json: { leaseToken, result: { ok: true } } }));
  else
    await success(api.v1.jobs[':id'].fail.$post({ param: { id }, json: { leaseToken, error: 'no', forGood: true } }));
  return { id, queue, tenant, statusUrl };
}

describe('GET /v1/jobs/{id}/history', () => {
  it("lists a job's events, oldest first, without the claim's lease token", async () => {
    const { id } = await finishedJob('complete');
    const { events } = await success(api.v1.jobs[':id'].history.$get({ param: { id } }));
    expect(events.map((event) => event.kind)).toEqual(['enqueued', 'claimed', 'completed']);
    expect(events.every((event) => event.jobId === id)).toBe(true);
    expect(JSON.stringify(events)).not.toContain('leaseToken');
  });

  it("answers 404 for an unknown job and for another tenant's, and 401 to a status token", async () => {
    const { id, statusUrl } = await finishedJob('complete');
    const otherTenantKey = await createKey(['read'], uniqueName('other'));
    for (const response of [
      await client().v1.jobs[':id'].history.$get({ param: { id: crypto.randomUUID() } }),
      await client(otherTenantKey).v1.jobs[':id'].history.$get({ param: { id } }),
    ]) {
      expect(response.status).toBe(404);
      expect((await problemOf(response)).title).toBe('Not found');
    }
    const token = new URL(statusUrl!).searchParams.get('token');
    expect((await request(`/v1/jobs/${id}/history?token=${token}`)).status).toBe(401);
  });
});

describe('GET /v1/stats/throughput', () => {
  it('counts finished jobs per queue and minute; a tenant-bound key only its own', async () => {
    const tenant = uniqueName('tenant');
    const succeeded = await finishedJob('complete', tenant);
    const failed = await finishedJob('fail', tenant);

    const { throughput } = await success(api.v1.stats.throughput.$get());
    const minute = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/);
    expect(throughput.filter((row) => row.queue === succeeded.queue)).toEqual([
      { queue: succeeded.queue, minute, succeeded: 1, failed: 0 },
    ]);
    expect(throughput.filter((row) => row.queue === failed.queue)).toEqual([
      { queue: failed.queue, minute, succeeded: 0, failed: 1 },
    ]);

    const otherTenantKey = await createKey(['read'], uniqueName('other'));
    const { throughput: othersView } = await success(client(otherTenantKey).v1.stats.throughput.$get());
    expect(othersView.filter((row) => row.queue === succeeded.queue)).toEqual([]);
  });
});

/** An attempts row of the stats: counts as given, any percentiles. */
const attemptsRow = (counts: { attempts: number; succeeded: number; failed: number }) => ({
  ...counts,
  waitMs: { p50: expect.any(Number), p95: expect.any(Number) },
  runMs: { p50: expect.any(Number), p95: expect.any(Number) },
});

describe('GET /v1/stats/timings', () => {
  it("gives the wait and run percentiles of the window's attempts per queue and tenant; a tenant-bound key only its own", async () => {
    const succeeded = await finishedJob('complete');
    const failed = await finishedJob('fail');
    const ownKey = await createKey(['read'], succeeded.tenant);

    const all = await success(api.v1.stats.timings.$get({ query: { window: '24h' } }));
    expect(all.window).toBe('24h');
    expect(all.timings.find((row) => row.queue === succeeded.queue)).toMatchObject({
      tenant: succeeded.tenant,
      ...attemptsRow({ attempts: 1, succeeded: 1, failed: 0 }),
    });
    expect(all.timings.find((row) => row.queue === failed.queue)).toMatchObject({
      attempts: 1,
      succeeded: 0,
      failed: 1,
    });

    const own = await success(client(ownKey).v1.stats.timings.$get({ query: {} }));
    expect(own.window).toBe('1h');
    expect(own.timings.map((row) => row.tenant)).toEqual([succeeded.tenant]);
  });

  it('refuses a window it does not know with 400, naming it', async () => {
    const problem = await problemOf(await request('/v1/stats/timings?window=30d', { apiKey: ADMIN_TOKEN }));
    expect(problem.status).toBe(400);
    expect(problem.errors?.[0]?.path).toBe('window');
  });
});

describe('GET /v1/stats/daily', () => {
  it("gives today's attempts per queue and tenant, and over the period; a tenant-bound key only its own", async () => {
    const succeeded = await finishedJob('complete');
    const failed = await finishedJob('fail', succeeded.tenant);
    const ownKey = await createKey(['read'], succeeded.tenant);

    const all = await success(api.v1.stats.daily.$get({ query: { days: '7' } }));
    expect(all.days).toBe(7);
    const today = new Date().toISOString().slice(0, 10);
    const row = (rows: typeof all.totals, queue: string) => rows.find((candidate) => candidate.queue === queue);
    expect(row(all.daily, succeeded.queue)).toMatchObject({
      day: today,
      tenant: succeeded.tenant,
      ...attemptsRow({ attempts: 1, succeeded: 1, failed: 0 }),
    });
    expect(row(all.totals, failed.queue)).toMatchObject({ attempts: 1, succeeded: 0, failed: 1 });

    const own = await success(client(ownKey).v1.stats.daily.$get({ query: {} }));
    expect(own.days).toBe(30);
    expect(new Set(own.totals.map((total) => total.tenant))).toEqual(new Set([succeeded.tenant]));
    expect(own.totals.map((total) => total.queue).sort()).toEqual([succeeded.queue, failed.queue].sort());
  });

  it('refuses a period it cannot read with 400, naming it', async () => {
    for (const days of ['0', '1001', '1.5', 'week', '1e2']) {
      const problem = await problemOf(await request(`/v1/stats/daily?days=${days}`, { apiKey: ADMIN_TOKEN }));
      expect(problem.status).toBe(400);
      expect(problem.errors?.[0]?.path).toBe('days');
    }
  });
});
