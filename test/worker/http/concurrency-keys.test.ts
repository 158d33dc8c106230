import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, client, createKey, postJson, problemOf, request, success, uniqueName } from './support/api';

const api = client();

async function enqueueKeyed(queue: string, json: Record<string, unknown>) {
  const response = await postJson(`/v1/queues/${queue}/jobs`, json);
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as { id: string; status: string };
}

async function claim(queue: string, max = 10) {
  const { jobs } = await success(
    api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'keys-test', max } }),
  );
  return jobs;
}

async function complete(job: { id: string; leaseToken: string }) {
  await success(api.v1.jobs[':id'].complete.$post({ param: { id: job.id }, json: { leaseToken: job.leaseToken } }));
}

describe('concurrency and ordering keys over HTTP', () => {
  it('holds a key to its limit; the held job says why it waits, the stats count it, the key is listed', async () => {
    const queue = uniqueName('keys');
    const tenant = uniqueName('keys-tenant');
    const key = uniqueName('account');
    for (const payload of [1, 2, 3])
      await enqueueKeyed(queue, { tenant, payload, concurrencyKey: key, concurrencyLimit: 2 });
    const held = await enqueueKeyed(queue, { tenant, payload: 4, concurrencyKey: key, concurrencyLimit: 2 });
    expect(held.status).toBe('queued');

    const history = await success(api.v1.jobs[':id'].history.$get({ param: { id: held.id } }));
    expect(history.events.map((event) => event.kind)).toEqual(['enqueued', 'held']);
    const steps = await success(api.v1.jobs[':id'].steps.$get({ param: { id: held.id } }));
    expect(steps.waitingFor).toEqual([{ kind: 'key', key, ordered: false, blockedBy: null }]);
    const { stats } = await success(api.v1.stats.$get());
    expect(stats.find((row) => row.queue === queue && row.status === 'queued')).toMatchObject({
      count: 4,
      held: 2,
      heldBy: { concurrency: 2, order: 0, failedHead: 0, rate: 0 },
    });
    const { queues } = await success(api.v1.queues.$get());
    expect(queues.find((summary) => summary.queue === queue)?.held).toBe(2);
    const page = await success(api.v1['concurrency-keys'].$get({ query: { tenant } }));
    expect(page).toEqual({
      keys: [
        {
          tenant,
          key,
          ordered: false,
          slots: 2,
          taken: 2,
          rate: null,
          held: 2,
          onFailure: 'continue',
          blockedBy: null,
          blockedAt: null,
        },
      ],
      nextCursor: null,
    });

    const first = await claim(queue);
    expect(first.map((job) => job.payload)).toEqual([1, 2]);
    await complete(first[0]!);
    expect((await claim(queue)).map((job) => job.payload)).toEqual([3]);
  });

  it('runs an ordering key in enqueue order, holds it on a failed head, and unblocks it for an admin', async () => {
    const queue = uniqueName('ordered');
    const key = uniqueName('order');
    for (const payload of ['a', 'b', 'c']) await enqueueKeyed(queue, { payload, orderingKey: key, maxAttempts: 1 });
    const [head] = await claim(queue);
    expect(head?.payload).toBe('a');
    expect(await claim(queue)).toEqual([]);
    await success(
      api.v1.jobs[':id'].fail.$post({
        param: { id: head!.id },
        json: { leaseToken: head!.leaseToken, error: { message: 'no' } },
      }),
    );
    expect(await claim(queue)).toEqual([]);
    const blocked = await success(api.v1['concurrency-keys'].$get({ query: { blocked: 'true' } }));
    expect(blocked.keys.find((k) => k.key === key)).toMatchObject({ blockedBy: head!.id, held: 2, ordered: true });
    const { queues } = await success(api.v1.queues.$get());
    expect(queues.find((summary) => summary.queue === queue)?.heldBy).toEqual({
      concurrency: 0,
      order: 0,
      failedHead: 2,
      rate: 0,
    });

    // Not for a read key.
    const reader = await createKey(['read']);
    const refused = await client(reader).v1['concurrency-keys'][':key'].unblock.$post({ param: { key }, query: {} });
    expect(refused.status).toBe(403);
    const answer = await success(api.v1['concurrency-keys'][':key'].unblock.$post({ param: { key }, query: {} }));
    expect(answer).toEqual({ unblocked: true });
    expect((await claim(queue)).map((job) => job.payload)).toEqual(['b']);
    expect(await success(api.v1['concurrency-keys'][':key'].unblock.$post({ param: { key }, query: {} }))).toEqual({
      unblocked: false,
    });
  });

  it("shows a tenant-bound key its own tenant's keys only", async () => {
    const queue = uniqueName('bound');
    const mine = uniqueName('mine');
    const theirs = uniqueName('theirs');
    await enqueueKeyed(queue, { tenant: mine, concurrencyKey: 'k' });
    await enqueueKeyed(queue, { tenant: theirs, concurrencyKey: 'k' });
    const bound = client(await createKey(['read'], mine));
    const own = await success(bound.v1['concurrency-keys'].$get({ query: {} }));
    expect(own.keys.map((k) => k.tenant)).toEqual([mine]);
    expect(await success(bound.v1['concurrency-keys'].$get({ query: { tenant: theirs } }))).toEqual({
      keys: [],
      nextCursor: null,
    });
  });

  it('refuses bad key fields by name with a problem, storing nothing', async () => {
    const queue = uniqueName('bad-keys');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ concurrencyKey: 'a', orderingKey: 'b' }, 'orderingKey'],
      [{ concurrencyKey: '' }, 'concurrencyKey'],
      [{ concurrencyKey: 'x'.repeat(257) }, 'concurrencyKey'],
      [{ concurrencyKey: 'a', concurrencyLimit: 0 }, 'concurrencyLimit'],
      [{ concurrencyLimit: 3 }, 'concurrencyLimit'],
      [{ orderingKey: 'a', orderingOnFailure: 'skip' }, 'orderingOnFailure'],
      [{ orderingOnFailure: 'hold' }, 'orderingOnFailure'],
    ];
    for (const [json, field] of cases) {
      const response = await postJson(`/v1/queues/${queue}/jobs`, json);
      expect(response.status, JSON.stringify(json)).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      const problem = (await problemOf(response)) as { errors?: Array<{ path: string }> };
      expect(problem.errors?.map((error) => error.path)).toContain(field);
    }
    const kinds = uniqueName('kinds');
    await enqueueKeyed(queue, { orderingKey: kinds });
    const mixed = await postJson(`/v1/queues/${queue}/jobs`, { concurrencyKey: kinds });
    expect(mixed.status).toBe(400);
    expect((await problemOf(mixed)).detail).toMatch(/is in use as an ordering key/);
    const flow = await postJson('/v1/flows', { jobs: [{ ref: 'a', queue, orderingKey: 'x' }] });
    expect(flow.status).toBe(400);
    const { jobs } = await success(api.v1.jobs.$get({ query: { queue } }));
    expect(jobs).toHaveLength(1);
    const bogus = await request('/v1/concurrency-keys?cursor=nope', { apiKey: ADMIN_TOKEN });
    expect(bogus.status).toBe(400);
  });
});
