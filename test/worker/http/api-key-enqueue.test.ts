import { describe, expect, it } from 'vitest';
import { client, createKey, postJson, problemOf, request, success, uniqueName } from './support/api';

/**
 * An enqueue with an API key checks the key in its own statement (one round
 * trip, counted in test/api-key-enqueue-round-trips.test.ts): it must refuse
 * as a route that looks the key up first does, and store nothing when it refuses.
 */
const admin = client();

async function storedTenants(queue: string): Promise<string[]> {
  const { jobs } = await success(admin.v1.jobs.$get({ query: { queue } }));
  return jobs.map((job) => job.tenant).sort();
}

async function revokedKey(): Promise<string> {
  const secret = await createKey(['enqueue']);
  const { id } = (await success(admin.v1.keys.$get())).keys.find((key) => secret.startsWith(key.secretPrefix))!;
  await admin.v1.keys[':id'].$delete({ param: { id } });
  return secret;
}

const single = (queue: string) => `/v1/queues/${queue}/jobs`;
const batch = (queue: string) => `/v1/queues/${queue}/jobs/batch`;

describe('an enqueue with an API key', () => {
  it.each([
    ['a revoked key', revokedKey],
    ['a key that does not exist', async () => `skiplock_${'B'.repeat(43)}`],
  ])('refuses %s with 401, storing nothing', async (_, keyOf) => {
    const queue = uniqueName('key-enqueue-401');
    const apiKey = await keyOf();

    const one = await postJson(single(queue), { payload: 1 }, apiKey);
    const many = await postJson(batch(queue), { jobs: [{ payload: 1 }, { payload: 2 }] }, apiKey);

    for (const response of [one, many]) {
      expect(response.status).toBe(401);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
      expect(await problemOf(response)).toMatchObject({ status: 401, detail: 'the API key is unknown or revoked' });
    }
    expect(await storedTenants(queue)).toEqual([]);
  });

  it('refuses a key without the enqueue scope with 403, storing nothing', async () => {
    const queue = uniqueName('key-enqueue-403');
    const apiKey = await createKey(['read', 'worker']);

    const one = await postJson(single(queue), {}, apiKey);
    const many = await postJson(batch(queue), { jobs: [{}, { tenant: 'acme' }] }, apiKey);

    for (const response of [one, many]) {
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await problemOf(response)).toMatchObject({
        status: 403,
        detail: 'this key lacks the enqueue or admin scope',
      });
    }
    expect(await storedTenants(queue)).toEqual([]);
  });

  it("refuses a tenant-bound key another tenant's job, naming it, storing nothing", async () => {
    const queue = uniqueName('key-enqueue-tenant');
    const mine = uniqueName('mine');
    const theirs = uniqueName('theirs');
    const apiKey = await createKey(['enqueue'], mine);

    const one = await postJson(single(queue), { tenant: theirs }, apiKey);
    const many = await postJson(batch(queue), { jobs: [{ tenant: mine }, { tenant: theirs }] }, apiKey);

    expect(await problemOf(one)).toMatchObject({ status: 403, errors: [{ path: 'tenant' }] });
    expect(await problemOf(many)).toMatchObject({
      status: 403,
      detail: `this key enqueues only for tenant ${mine}`,
      errors: [{ path: 'jobs.1.tenant', message: `must be ${mine} (or left out) with this key` }],
    });
    expect(await storedTenants(queue)).toEqual([]);
  });

  it("gives a tenant-bound key's jobs its tenant, whether they name it, leave it out, or both in one batch", async () => {
    const queue = uniqueName('key-enqueue-own');
    const mine = uniqueName('mine');
    const apiKey = await createKey(['enqueue'], mine);

    const named = await postJson(single(queue), { tenant: mine }, apiKey);
    const implicit = await postJson(single(queue), {}, apiKey);
    const mixed = await postJson(batch(queue), { jobs: [{}, { tenant: mine }] }, apiKey);

    expect([named.status, implicit.status, mixed.status]).toEqual([201, 201, 201]);
    expect(await storedTenants(queue)).toEqual([mine, mine, mine, mine]);
  });

  it("gives an unbound key's jobs the tenant they name, or 'default'", async () => {
    const queue = uniqueName('key-enqueue-unbound');
    const apiKey = await createKey(['enqueue']);

    const responses = [
      await postJson(single(queue), { tenant: 'acme' }, apiKey),
      await postJson(single(queue), {}, apiKey),
      await postJson(batch(queue), { jobs: [{}, {}] }, apiKey),
    ];

    expect(responses.map((response) => response.status)).toEqual([201, 201, 201]);
    expect(await storedTenants(queue)).toEqual(['acme', 'default', 'default', 'default']);
  });

  it('refuses a bad key before its body: 401 and 403 for what would be a 400', async () => {
    const queue = uniqueName('key-enqueue-body');
    const reader = await createKey(['read']);
    const malformed = (apiKey: string) =>
      request(single(queue), {
        method: 'POST',
        apiKey,
        headers: { 'content-type': 'application/json' },
        body: '{"payload":',
      });

    const unknown = await postJson(single(queue), { priority: 'high' }, await revokedKey());
    const unscoped = await postJson(batch(queue), { jobs: [{ runAt: 'soon' }] }, reader);
    const enqueuer = await postJson(single(queue), { priority: 'high' }, await createKey(['enqueue']));

    expect(unknown.status).toBe(401);
    expect(unscoped.status).toBe(403);
    expect((await malformed(await revokedKey())).status).toBe(401);
    expect(enqueuer.status).toBe(400);
    expect(await storedTenants(queue)).toEqual([]);
  });

  it('answers a dedup conflict with 409, and a dedup hit to a key without read by id and status only', async () => {
    const queue = uniqueName('key-enqueue-dedup');
    const apiKey = await createKey(['enqueue']);
    const first = await postJson(single(queue), { dedupKey: 'k', payload: { secret: 1 } }, apiKey);

    const hit = await postJson(single(queue), { dedupKey: 'k' }, apiKey);
    const refused = await postJson(single(queue), { dedupKey: 'k', dedupOnConflict: 'refuse' }, apiKey);

    expect(first.status).toBe(201);
    expect(hit.status).toBe(200);
    expect(Object.keys((await hit.json()) as object).sort()).toEqual(
      ['debounced', 'deduplicated', 'id', 'replaced', 'status', 'statusUrl'].sort(),
    );
    expect(await problemOf(refused)).toMatchObject({ status: 409 });
  });

  it('counts an unknown key as a failed authentication, and turns its client away at the limit', async () => {
    const address = `198.51.100.${Math.floor(Math.random() * 250) + 1}-${crypto.randomUUID()}`;
    const unknownKey = `skiplock_${'C'.repeat(43)}`;
    const enqueueFrom = (apiKey: string) =>
      request(single(uniqueName('key-enqueue-limit')), {
        method: 'POST',
        apiKey,
        headers: { 'content-type': 'application/json', 'cf-connecting-ip': address },
        body: '{}',
      });

    const statuses = [];
    for (let i = 0; i < 10; i++) statuses.push((await enqueueFrom(unknownKey)).status);
    const turnedAway = await enqueueFrom(await createKey(['enqueue']));

    expect(statuses).toEqual(Array(10).fill(401));
    expect(turnedAway.status).toBe(429);
  });
});
