import { describe, expect, it } from 'vitest';
import { call, createKey, expectJson, stack, uniqueName } from './support/api';

const admin = stack.adminToken;

type Page = { jobs: Array<{ id: string; tenant: string; status: string }> };

/** Jobs of `queue` that wait an hour, so no drain takes them. */
async function waitingJobs(queue: string, tenant: string, count: number) {
  for (let i = 0; i < count; i++) {
    await expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body: { tenant, delaySeconds: 3600 } }), 201);
  }
}

async function statuses(queue: string): Promise<Record<string, string[]>> {
  const page = await expectJson<Page>(await call(`/v1/jobs?queue=${queue}`, { key: admin }), 200);
  const byTenant: Record<string, string[]> = {};
  for (const job of page.jobs) (byTenant[job.tenant] ??= []).push(job.status);
  return byTenant;
}

/**
 * Bulk actions (issue 41): one request reaches many jobs, so they need the
 * operator scope; a tenant-bound operator key acts on its own tenant's jobs
 * only, whatever its filter names, and learns counts, never jobs.
 */
describe('bulk actions', () => {
  it('refuse a key without the operator scope, bound or not, dry runs included, and change nothing', async () => {
    const queue = uniqueName('sec-bulk-unbound');
    const tenant = uniqueName('victim');
    await waitingJobs(queue, tenant, 2);
    const backend = await createKey(['enqueue', 'read', 'worker']);
    const tenantBackend = await createKey(['enqueue', 'read'], tenant);
    for (const key of [backend, tenantBackend]) {
      for (const action of ['retry', 'cancel', 'delete', 'redrive'] as const) {
        for (const dryRun of [true, false]) {
          const response = await call('/v1/jobs/bulk', { key, body: { action, filter: { queue }, dryRun } });
          expect(response.status, `${action} dryRun=${dryRun}`).toBe(403);
        }
      }
    }
    const reschedule = await call('/v1/jobs/bulk', {
      key: backend,
      body: { action: 'reschedule', all: true, change: { priority: 5 } },
    });
    expect(reschedule.status).toBe(403);
    expect(await statuses(queue)).toEqual({ [tenant]: ['scheduled', 'scheduled'] });
  });

  it("act on a tenant-bound key's own tenant only: another tenant's name and `all` reach none of theirs", async () => {
    const queue = uniqueName('sec-bulk-bound');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    await waitingJobs(queue, mine, 2);
    await waitingJobs(queue, theirs, 3);
    const bound = await createKey(['operator'], mine);

    const named = await call('/v1/jobs/bulk', {
      key: bound,
      body: { action: 'cancel', filter: { queue, tenant: theirs } },
    });
    expect(await expectJson(named, 200)).toMatchObject({ matched: 0, changed: 0 });
    const dry = await call('/v1/jobs/bulk', { key: bound, body: { action: 'cancel', all: true, dryRun: true } });
    // Counts of its own jobs only; the answer never carries a job.
    expect(await expectJson(dry, 200)).toEqual({
      action: 'cancel',
      dryRun: true,
      matched: 2,
      changed: 0,
      byStatus: { scheduled: 2 },
      batches: 0,
      nextCursor: null,
    });
    const everything = await call('/v1/jobs/bulk', { key: bound, body: { action: 'cancel', all: true } });
    expect(await expectJson(everything, 200)).toMatchObject({ matched: 2, changed: 2 });
    const deleted = await call('/v1/jobs/bulk', { key: bound, body: { action: 'delete', all: true } });
    expect(await expectJson(deleted, 200)).toMatchObject({ matched: 2, changed: 2 });

    expect(await statuses(queue)).toEqual({ [theirs]: ['scheduled', 'scheduled', 'scheduled'] });
  });

  it("list a tenant-bound key's own dead jobs only", async () => {
    const queue = uniqueName('sec-dead');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    for (const tenant of [mine, theirs]) {
      await expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body: { tenant } }), 201);
      const claim = await call(`/v1/queues/${queue}/claim`, { key: admin, body: { workerId: 'sec', max: 1 } });
      const [job] = (await expectJson<{ jobs: Array<{ id: string; leaseToken: string }> }>(claim, 200)).jobs;
      const fail = { leaseToken: job!.leaseToken, error: 'boom', forGood: true };
      await expectJson(await call(`/v1/jobs/${job!.id}/fail`, { key: admin, body: fail }), 200);
    }
    const reader = await createKey(['read'], mine);
    const own = await expectJson<Page>(await call(`/v1/dead-jobs?queue=${queue}`, { key: reader }), 200);
    expect(own.jobs.map((job) => job.tenant)).toEqual([mine]);
    const named = await call(`/v1/dead-jobs?queue=${queue}&tenant=${theirs}`, { key: reader });
    expect((await expectJson<Page>(named, 200)).jobs).toEqual([]);
  });
});
