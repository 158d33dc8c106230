import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminHeaders } from '../bench/worker-stack';
import { startWorkerdStack, type WorkerdStack } from '../bench/workerd-stack';
import { createTestDatabase, type TestDatabase } from './support/database';

/**
 * Issue 42: an enqueue through the Worker, whose Neon HTTP driver makes every
 * statement a round trip to the database, costs one round trip, with an API
 * key as with the ADMIN_TOKEN: the key is checked in the enqueue's statement.
 * Counted at the local Neon proxy, with nothing else sending (no cron, no fast path).
 */
let database: TestDatabase;
let workerd: WorkerdStack;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: false });
  workerd = await startWorkerdStack(database.url, { FAST_PATH: 'off' }, { cron: false });
}, 180_000);

afterAll(async () => {
  await workerd?.stop();
  await database?.drop();
});

async function post(path: string, authorization: string, body: unknown): Promise<Response> {
  return fetch(`${workerd.url}${path}`, {
    method: 'POST',
    headers: { ...adminHeaders, authorization },
    body: JSON.stringify(body),
  });
}

/** The round trips to the database from the request's send until the Worker has been quiet a while. */
async function roundTripsOf(send: () => Promise<Response>, status: number): Promise<number> {
  await sleep(500);
  const before = workerd.traffic().httpRequests;
  const response = await send();
  expect(response.status, await response.clone().text()).toBe(status);
  await response.arrayBuffer();
  await sleep(500);
  return workerd.traffic().httpRequests - before;
}

describe('an enqueue through the Worker over SQL over HTTP', () => {
  it('takes one round trip with an API key, single or batch, as with the ADMIN_TOKEN', async () => {
    const created = await post('/v1/keys', adminHeaders.authorization, { name: 'round-trips', scopes: ['enqueue'] });
    const { secret } = (await created.json()) as { secret: string };
    const apiKey = `Bearer ${secret}`;
    // The first request loads the Worker's settings and checks its schema.
    await post('/v1/queues/warm-up/jobs', apiKey, {});

    const trips = {
      adminSingle: await roundTripsOf(() => post('/v1/queues/trips/jobs', adminHeaders.authorization, {}), 201),
      keySingle: await roundTripsOf(() => post('/v1/queues/trips/jobs', apiKey, { payload: { n: 1 } }), 201),
      keyBatch: await roundTripsOf(() => post('/v1/queues/trips/jobs/batch', apiKey, { jobs: [{}, {}, {}] }), 201),
      keyTenant: await roundTripsOf(() => post('/v1/queues/trips/jobs', apiKey, { tenant: 'acme' }), 201),
    };

    expect(trips).toEqual({ adminSingle: 1, keySingle: 1, keyBatch: 1, keyTenant: 1 });
  });
});
