import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, claimOne, client, createKey, problemOf, request, success, uniqueName } from './support/api';

const api = client();

async function enqueueTagged(queue: string, json: { tags?: string[]; payload?: unknown; tenant?: string }) {
  const response = await api.v1.queues[':queue'].jobs.$post({ param: { queue }, json, header: {} });
  if (response.status !== 201) throw new Error(`expected 201, got ${response.status}: ${await response.text()}`);
  return response.json();
}

/** The ids a GET /v1/jobs answers for this query string, sorted. */
async function listed(query: string, apiKey = ADMIN_TOKEN): Promise<string[]> {
  const response = await request(`/v1/jobs?${query}`, { apiKey });
  expect(response.status).toBe(200);
  const page = (await response.json()) as { jobs: Array<{ id: string }> };
  return page.jobs.map((job) => job.id).sort();
}

const sorted = (...ids: string[]) => [...ids].sort();

describe('tags and search over HTTP', () => {
  it('stores tags at enqueue, shows them on the job, and lists by tags, a payload match and error text', async () => {
    const queue = uniqueName('tags');
    const a = await enqueueTagged(queue, { tags: ['env=prod', 'customer:42', 'env=prod'], payload: { customer: 42 } });
    const b = await enqueueTagged(queue, { tags: ['env=prod'], payload: { customer: 7, plan: 'pro' } });
    const plain = await enqueueTagged(queue, { payload: { customer: 42 } });
    expect(a.tags).toEqual(['env=prod', 'customer:42']);
    expect(plain.tags).toEqual([]);
    expect(
      (await success(api.v1.jobs[':id'].$get({ param: { id: a.id }, query: {} }))) as { tags: string[] },
    ).toMatchObject({
      tags: ['env=prod', 'customer:42'],
    });

    expect(await listed(`queue=${queue}&tag=env%3Dprod`)).toEqual(sorted(a.id, b.id));
    expect(await listed(`queue=${queue}&tag=env%3Dprod&tag=customer%3A42`)).toEqual([a.id]);
    expect(await listed(`queue=${queue}&payload=${encodeURIComponent('{"customer":42}')}`)).toEqual(
      sorted(a.id, plain.id),
    );
    // The typed client sends a list of tags as the repeated parameter.
    const page = await success(api.v1.jobs.$get({ query: { queue, tag: ['env=prod', 'customer:42'] } }));
    expect(page.jobs.map((job) => job.id)).toEqual([a.id]);

    const claimed = await claimOne(queue);
    await success(
      api.v1.jobs[':id'].fail.$post({
        param: { id: claimed.id },
        json: { leaseToken: claimed.leaseToken, error: { message: 'Upstream timeout' }, forGood: true },
      }),
    );
    expect(await listed(`queue=${queue}&error=TIMEOUT`)).toEqual([claimed.id]);
    const dead = await request(`/v1/dead-jobs?queue=${queue}&tag=customer%3A42&error=timeout`, { apiKey: ADMIN_TOKEN });
    expect(((await dead.json()) as { jobs: Array<{ id: string }> }).jobs.map((job) => job.id)).toEqual([claimed.id]);
    expect(await listed(`queue=${queue}&error=nothing-like-it`)).toEqual([]);
  });

  it.each([
    ['tag=bad%20tag', 'tag'],
    ['tag=-dash', 'tag'],
    ['payload=%5B1%5D', 'payload'],
    ['payload=42', 'payload'],
    ['payload=not-json', 'payload'],
    ['error=', 'error'],
  ])('refuses ?%s by name (400)', async (query, path) => {
    const response = await request(`/v1/jobs?${query}`, { apiKey: ADMIN_TOKEN });
    expect(response.status).toBe(400);
    const problem = await problemOf(response);
    expect(problem.errors?.[0]?.path).toMatch(new RegExp(`^${path}`));
  });

  it('refuses a bad tag or too many at enqueue by name, storing nothing', async () => {
    const queue = uniqueName('tags-bad');
    const tooMany = Array.from({ length: 17 }, (_, index) => `t${index}`);
    for (const [tags, path] of [
      [['ok', 'not ok'], 'tags.1'],
      [tooMany, 'tags'],
    ] as const) {
      const response = await api.v1.queues[':queue'].jobs.$post({
        param: { queue },
        json: { tags: [...tags] },
        header: {},
      });
      expect(response.status).toBe(400);
      expect((await problemOf(response)).errors?.[0]?.path).toBe(path);
    }
    expect(await listed(`queue=${queue}`)).toEqual([]);
  });

  it('shows a tenant-bound key its own tenant only, whatever the tag or payload', async () => {
    const queue = uniqueName('tags-tenant');
    const tenant = uniqueName('acme');
    const own = await enqueueTagged(queue, { tenant, tags: ['shared'], payload: { k: 1 } });
    await enqueueTagged(queue, { tenant: uniqueName('other'), tags: ['shared'], payload: { k: 1 } });
    const key = await createKey(['read'], tenant);
    expect(await listed(`queue=${queue}&tag=shared`, key)).toEqual([own.id]);
    expect(await listed(`queue=${queue}&payload=${encodeURIComponent('{"k":1}')}`, key)).toEqual([own.id]);
  });

  it('bulk actions filter by tags and a payload match, and refuse a bad one by name', async () => {
    const queue = uniqueName('tags-bulk');
    const eu = await enqueueTagged(queue, { tags: ['batch:7'], payload: { region: 'eu' } });
    await enqueueTagged(queue, { tags: ['batch:7'], payload: { region: 'us' } });
    await enqueueTagged(queue, { tags: ['batch:8'], payload: { region: 'eu' } });

    const dry = await success(
      api.v1.jobs.bulk.$post({ json: { action: 'cancel', filter: { queue, tags: ['batch:7'] }, dryRun: true } }),
    );
    expect(dry).toMatchObject({ matched: 2, changed: 0 });
    const done = await success(
      api.v1.jobs.bulk.$post({
        json: { action: 'cancel', filter: { queue, tags: ['batch:7'], payload: { region: 'eu' } } },
      }),
    );
    expect(done).toMatchObject({ matched: 1, changed: 1 });
    expect(await listed(`queue=${queue}&status=cancelled`)).toEqual([eu.id]);

    for (const [filter, path] of [
      [{ queue, tags: ['a b'] }, 'filter.tags.0'],
      [{ queue, payload: [1] }, 'filter.payload'],
    ] as const) {
      const response = await request('/v1/jobs/bulk', {
        apiKey: ADMIN_TOKEN,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'cancel', filter }),
      });
      expect(response.status).toBe(400);
      expect((await problemOf(response)).errors?.[0]?.path).toBe(path);
    }
    expect(await listed(`queue=${queue}&status=cancelled`)).toEqual([eu.id]);
  });
});
