import { describe, expect, it } from 'vitest';
import { call, createKey, expectJson, stack, uniqueName } from './support/api';

const admin = stack.adminToken;

type Page = { jobs: Array<{ id: string; tenant: string; status: string }> };

/**
 * Tags and search (issue 41): a tenant-bound key that searches by a tag, a
 * payload match or an error's text that another tenant's jobs share finds
 * its own tenant's jobs only, and a bulk action by them reaches no others.
 */
describe('tags and search', () => {
  it("find a tenant-bound key's own jobs only, by tag, payload and error text", async () => {
    const queue = uniqueName('sec-tags');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    const shared = { tags: ['customer:42'], payload: { customer: 42 }, delaySeconds: 3600 };
    for (const tenant of [mine, theirs]) {
      await expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body: { tenant, ...shared } }), 201);
    }
    const failing = `${queue}-failing`;
    for (const tenant of [mine, theirs]) {
      await expectJson(await call(`/v1/queues/${failing}/jobs`, { key: admin, body: { tenant } }), 201);
      const claim = await call(`/v1/queues/${failing}/claim`, { key: admin, body: { workerId: 'sec', max: 1 } });
      const [job] = (await expectJson<{ jobs: Array<{ id: string; leaseToken: string }> }>(claim, 200)).jobs;
      const fail = { leaseToken: job!.leaseToken, error: { message: 'secret-marker timeout' }, forGood: true };
      await expectJson(await call(`/v1/jobs/${job!.id}/fail`, { key: admin, body: fail }), 200);
    }

    const reader = await createKey(['read'], mine);
    const payload = encodeURIComponent('{"customer":42}');
    for (const query of [
      `queue=${queue}&tag=customer%3A42`,
      `queue=${queue}&payload=${payload}`,
      `queue=${failing}&error=secret-marker`,
    ]) {
      const page = await expectJson<Page>(await call(`/v1/jobs?${query}`, { key: reader }), 200);
      expect(
        page.jobs.map((job) => job.tenant),
        query,
      ).toEqual([mine]);
      const named = await call(`/v1/jobs?${query}&tenant=${theirs}`, { key: reader });
      expect((await expectJson<Page>(named, 200)).jobs, query).toEqual([]);
    }
  });

  it("bulk actions by tag and payload reach a tenant-bound key's own jobs only", async () => {
    const queue = uniqueName('sec-tags-bulk');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    for (const tenant of [mine, theirs]) {
      const body = { tenant, tags: ['batch:7'], payload: { region: 'eu' }, delaySeconds: 3600 };
      await expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body }), 201);
    }
    const bound = await createKey(['operator'], mine);
    const filter = { tags: ['batch:7'], payload: { region: 'eu' } };
    const cancelled = await call('/v1/jobs/bulk', { key: bound, body: { action: 'cancel', filter } });
    expect(await expectJson(cancelled, 200)).toMatchObject({ matched: 1, changed: 1 });

    const page = await expectJson<Page>(await call(`/v1/jobs?queue=${queue}`, { key: admin }), 200);
    const byTenant = Object.fromEntries(page.jobs.map((job) => [job.tenant, job.status]));
    expect(byTenant).toEqual({ [mine]: 'cancelled', [theirs]: 'scheduled' });
  });
});
