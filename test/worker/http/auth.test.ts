import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { ApiKeyScope } from '../../../src/engine/api-keys';
import {
  ADMIN_TOKEN,
  BASE_URL,
  type EnqueuedJob,
  claimOne,
  client,
  createKey,
  enqueueJob,
  problemOf,
  request,
  success,
  uniqueName,
} from './support/api';
import { fetchWithEnv } from './support/invoke';

const api = client();

interface RouteCall {
  name: string;
  /** The scope the route needs besides admin. */
  scope: ApiKeyScope;
  send(apiKey: string | undefined): Promise<Response>;
}

function call(method: string, path: string, body?: unknown) {
  return (apiKey: string | undefined) =>
    request(path, {
      method,
      apiKey,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
}

/** Every route that needs a key, with a request it would accept. */
async function routeCalls(): Promise<RouteCall[]> {
  const queue = uniqueName('auth-matrix');
  const finished = await enqueueJob(queue);
  await api.v1.jobs[':id'].cancel.$post({ param: { id: finished.id } });
  const job = `/v1/jobs/${finished.id}`;
  const lease = { leaseToken: crypto.randomUUID() };
  return [
    { name: 'enqueue', scope: 'enqueue', send: call('POST', `/v1/queues/${queue}/jobs`, {}) },
    { name: 'enqueue batch', scope: 'enqueue', send: call('POST', `/v1/queues/${queue}/jobs/batch`, { jobs: [{}] }) },
    { name: 'get job', scope: 'read', send: call('GET', job) },
    { name: 'job events', scope: 'read', send: call('GET', `${job}/events`) },
    { name: 'job steps', scope: 'read', send: call('GET', `${job}/steps`) },
    { name: 'send event', scope: 'events', send: call('POST', '/v1/events', { event: uniqueName('auth-event') }) },
    {
      name: 'enqueue flow',
      scope: 'enqueue',
      send: call('POST', '/v1/flows', { jobs: [{ ref: 'a', queue: uniqueName('auth-flow') }] }),
    },
    { name: 'list jobs', scope: 'read', send: call('GET', `/v1/jobs?queue=${queue}`) },
    { name: 'cancel', scope: 'enqueue', send: call('POST', `${job}/cancel`) },
    { name: 'retry', scope: 'enqueue', send: call('POST', `/v1/jobs/${crypto.randomUUID()}/retry`) },
    { name: 'queues', scope: 'read', send: call('GET', '/v1/queues') },
    { name: 'stats', scope: 'read', send: call('GET', '/v1/stats') },
    { name: 'metrics', scope: 'operator', send: call('GET', '/metrics') },
    { name: 'get queue', scope: 'read', send: call('GET', `/v1/queues/${uniqueName('q')}`) },
    { name: 'put queue', scope: 'admin', send: call('PUT', `/v1/queues/${uniqueName('q')}`, { concurrency: 2 }) },
    {
      name: 'put queue retention',
      scope: 'admin',
      send: call('PUT', `/v1/queues/${uniqueName('q')}`, { retentionSeconds: 'none' }),
    },
    { name: 'pause queue', scope: 'admin', send: call('POST', `/v1/queues/${uniqueName('q')}/pause`) },
    { name: 'resume queue', scope: 'admin', send: call('POST', `/v1/queues/${uniqueName('q')}/resume`) },
    { name: 'job type retentions', scope: 'read', send: call('GET', '/v1/job-types') },
    {
      name: 'put job type retention',
      scope: 'admin',
      send: call('PUT', `/v1/job-types/${uniqueName('type')}/retention`, { retentionSeconds: 'none' }),
    },
    {
      name: 'hand back job type retention',
      scope: 'admin',
      send: call('DELETE', `/v1/job-types/${uniqueName('type')}/retention`),
    },
    { name: 'get tenant', scope: 'read', send: call('GET', `/v1/tenants/${uniqueName('t')}`) },
    { name: 'put tenant', scope: 'admin', send: call('PUT', `/v1/tenants/${uniqueName('t')}`, { concurrency: 2 }) },
    {
      name: 'claim',
      scope: 'worker',
      send: call('POST', `/v1/queues/${uniqueName('empty')}/claim`, { workerId: 'w' }),
    },
    { name: 'complete', scope: 'worker', send: call('POST', `${job}/complete`, lease) },
    { name: 'fail', scope: 'worker', send: call('POST', `${job}/fail`, lease) },
    { name: 'extend', scope: 'worker', send: call('POST', `${job}/extend`, lease) },
    { name: 'release', scope: 'worker', send: call('POST', `${job}/release`, lease) },
    { name: 'create key', scope: 'admin', send: call('POST', '/v1/keys', { name: 'k', scopes: ['read'] }) },
    { name: 'list keys', scope: 'admin', send: call('GET', '/v1/keys') },
    { name: 'revoke key', scope: 'admin', send: call('DELETE', `/v1/keys/${crypto.randomUUID()}`) },
  ];
}

describe('authentication', () => {
  it.each([
    ['no Authorization header', undefined],
    ['a key that does not exist', `skiplock_${'A'.repeat(43)}`],
    ['a token of no key shape', 'wrong'],
  ])('answers 401 with a problem for %s', async (_, apiKey) => {
    const response = await request('/v1/jobs', { apiKey });

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect(await problemOf(response)).toMatchObject({
      type: 'https://skiplock.dev/problems/unauthorized',
      status: 401,
    });
  });

  it('answers 401 for an Authorization header that is not Bearer', async () => {
    const response = await request('/v1/jobs', { headers: { authorization: `Basic ${btoa('admin:secret')}` } });

    expect(response.status).toBe(401);
  });

  it('lets the ADMIN_TOKEN and a created key in, and a revoked key no more', async () => {
    const secret = await createKey(['read']);
    const { id } = (await success(api.v1.keys.$get())).keys.find((key) => secret.startsWith(key.secretPrefix))!;

    const before = await request('/v1/jobs?limit=1', { apiKey: secret });
    const revoked = await api.v1.keys[':id'].$delete({ param: { id } });
    const after = await request('/v1/jobs?limit=1', { apiKey: secret });

    expect((await request('/v1/jobs?limit=1', { apiKey: ADMIN_TOKEN })).status).toBe(200);
    expect(before.status).toBe(200);
    expect(await revoked.json()).toMatchObject({ id, revokedAt: expect.any(String) });
    expect(after.status).toBe(401);
  });
});

describe('scopes', async () => {
  const calls = await routeCalls();
  const keys = {
    admin: await createKey(['admin']),
    enqueue: await createKey(['enqueue']),
    read: await createKey(['read']),
    worker: await createKey(['worker']),
    events: await createKey(['events']),
    operator: await createKey(['operator']),
  } satisfies Record<ApiKeyScope, string>;

  const named = calls.map((route) => [route.name, route] as const);
  it.each(named)('%s: 401 without a key, 403 without its scope', async (_, route) => {
    for (const [scope, secret] of Object.entries(keys)) {
      const response = await route.send(secret);
      await response.body?.cancel();
      const allowed = scope === 'admin' || scope === route.scope;
      const expected = allowed ? expect.not.toBeOneOf([401, 403]) : 403;
      expect({ scope, status: response.status }).toEqual({ scope, status: expected });
    }
    expect((await route.send(undefined)).status).toBe(401);
  });
});

describe('a key without the read scope', () => {
  it('gets a job it changed by id and status only: reschedule, cancel and retry never show its payload or errors', async () => {
    const queue = uniqueName('no-read-changes');
    const enqueueOnly = await createKey(['enqueue']);
    const secret = { secret: 'of another caller' };
    const job = await enqueueJob(queue, { payload: secret, delaySeconds: 3600 });
    const send = (path: string, method: string, body?: unknown) =>
      request(path, {
        method,
        apiKey: enqueueOnly,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });

    const patched = await send(`/v1/jobs/${job.id}`, 'PATCH', { priority: 3 });
    const cancelled = await send(`/v1/jobs/${job.id}/cancel`, 'POST');
    const retried = await send(`/v1/jobs/${job.id}/retry`, 'POST');
    const whole = await success(api.v1.jobs[':id'].$get({ param: { id: job.id }, query: {} }));

    expect([patched.status, cancelled.status, retried.status]).toEqual([200, 200, 200]);
    expect(await patched.json()).toEqual({ id: job.id, status: 'scheduled' });
    expect(await cancelled.json()).toEqual({ id: job.id, status: 'cancelled' });
    expect(await retried.json()).toEqual({ id: job.id, status: 'queued' });
    // The changes happened all the same, and an admin key still reads the whole job.
    expect(whole).toMatchObject({ id: job.id, status: 'queued', priority: 3, payload: secret });
  });

  it('gets the whole job back with the read scope beside enqueue', async () => {
    const queue = uniqueName('read-changes');
    const job = await enqueueJob(queue, { payload: { mine: true } });
    const both = await createKey(['enqueue', 'read']);

    const cancelled = await request(`/v1/jobs/${job.id}/cancel`, { method: 'POST', apiKey: both });

    expect(await cancelled.json()).toMatchObject({ id: job.id, status: 'cancelled', payload: { mine: true } });
  });
});

describe('API keys', () => {
  it('shows the secret once, stores only a prefix of it, and lists keys without secrets', async () => {
    const name = uniqueName('key');
    const created = await api.v1.keys.$post({ json: { name, scopes: ['enqueue', 'read'], tenant: 'acme' } });
    const key = created.status === 201 ? await created.json() : undefined;
    const listed = (await success(api.v1.keys.$get())).keys.find((entry) => entry.id === key?.id);

    expect(key).toMatchObject({
      name,
      scopes: ['enqueue', 'read'],
      tenant: 'acme',
      revokedAt: null,
      secret: expect.stringMatching(/^skiplock_[\w-]{43}$/),
    });
    expect(key!.secret.startsWith(key!.secretPrefix)).toBe(true);
    expect(listed).toEqual({ ...key, secret: undefined });
    expect(Object.keys(listed!)).not.toContain('secret');
  });

  it.each([
    [{ name: 'k', scopes: ['admin'], tenant: 'acme' }, 'tenant'],
    [{ name: 'k', scopes: [] }, 'scopes'],
    [{ name: 'k', scopes: ['read', 'read'] }, 'scopes'],
    [{ name: 'k', scopes: ['root'] }, 'scopes.0'],
    [{ scopes: ['read'] }, 'name'],
  ])('refuses %j', async (body, path) => {
    const response = await request('/v1/keys', {
      method: 'POST',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

    expect((await problemOf(response)).errors?.[0]?.path).toBe(path);
  });

  it('answers 404 when revoking an unknown key', async () => {
    expect((await api.v1.keys[':id'].$delete({ param: { id: crypto.randomUUID() } })).status).toBe(404);
  });
});

describe('failed authentications', () => {
  /** A client of its own: failures count per address (CF-Connecting-IP, which Cloudflare sets). */
  const clientAddress = () => `198.51.100.${Math.floor(Math.random() * 250) + 1}-${crypto.randomUUID()}`;
  const asClient = (address: string, init: { apiKey?: string; path?: string } = {}) =>
    request(init.path ?? '/v1/jobs?limit=1', { apiKey: init.apiKey, headers: { 'cf-connecting-ip': address } });

  it('turn a client away after 10 in a minute, whatever it presents next, and no other client', async () => {
    const address = clientAddress();
    const job = await enqueueJob(uniqueName('auth-failures'));
    const failures = [
      ...Array.from({ length: 8 }, () => asClient(address, { apiKey: `skiplock_${'A'.repeat(43)}` })),
      asClient(address, { apiKey: 'not-a-key' }),
      asClient(address, { path: `/v1/jobs/${job.id}?token=v1.9999999999.${'A'.repeat(43)}` }),
    ];
    expect((await Promise.all(failures)).map((response) => response.status)).toEqual(Array(10).fill(401));

    const turnedAway = await asClient(address, { apiKey: ADMIN_TOKEN });
    const page = await asClient(address, {
      path: `/status/${job.id}?token=${new URL(job.statusUrl!).searchParams.get('token')}`,
    });
    const otherClient = await asClient(clientAddress(), { apiKey: ADMIN_TOKEN });

    expect(await problemOf(turnedAway)).toMatchObject({
      status: 429,
      type: expect.stringMatching(/too-many-failed-authentications$/),
    });
    expect(Number(turnedAway.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(turnedAway.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(page.status).toBe(429);
    expect(otherClient.status).toBe(200);
  });

  it('with a rate limit binding (AUTH_RATE_LIMITER), turn a client away at its limit', async () => {
    const address = clientAddress();
    const withBinding = (apiKey: string) =>
      fetchWithEnv({ AUTH_RATE_LIMITER: env.TEST_AUTH_RATE_LIMITER }, `${BASE_URL}/v1/jobs?limit=1`, {
        headers: { authorization: `Bearer ${apiKey}`, 'cf-connecting-ip': address },
      });

    // The binding allows 3 a minute (vitest.workers.config.ts): the fourth failure is over it.
    const failures = [];
    for (let i = 0; i < 4; i++) failures.push((await withBinding('not-a-key')).status);

    expect(failures).toEqual([401, 401, 401, 401]);
    expect((await withBinding(ADMIN_TOKEN)).status).toBe(429);
  });

  it('count bad status-page links too', async () => {
    const address = clientAddress();
    const job = await enqueueJob(uniqueName('auth-failures-page'));
    for (let i = 0; i < 10; i++) {
      expect((await asClient(address, { path: `/status/${job.id}?token=forged` })).status).toBe(401);
    }
    expect((await asClient(address, { apiKey: ADMIN_TOKEN })).status).toBe(429);
  });
});

describe('a tenant-bound key', async () => {
  const queue = uniqueName('tenant-bound');
  const mine = uniqueName('mine');
  const theirs = uniqueName('theirs');
  const key = await createKey(['read', 'enqueue', 'worker'], mine);
  const bound = client(key);

  it("does not see, list, cancel, retry or watch another tenant's jobs", async () => {
    const other = await enqueueJob(queue, { tenant: theirs });
    const own = await enqueueJob(queue, { tenant: mine });

    const responses = await Promise.all([
      bound.v1.jobs[':id'].$get({ param: { id: other.id }, query: {} }),
      bound.v1.jobs[':id'].cancel.$post({ param: { id: other.id } }),
      bound.v1.jobs[':id'].retry.$post({ param: { id: other.id } }),
      request(`/v1/jobs/${other.id}/events`, { apiKey: key }),
      bound.v1.tenants[':tenant'].$get({ param: { tenant: theirs } }),
    ]);
    const listed = await success(bound.v1.jobs.$get({ query: { queue } }));
    const listedTheirs = await success(bound.v1.jobs.$get({ query: { queue, tenant: theirs } }));

    expect(responses.map((response) => response.status)).toEqual([404, 404, 404, 404, 404]);
    expect(listed.jobs.map((job) => job.id)).toEqual([own.id]);
    expect(listedTheirs.jobs).toEqual([]);
  });

  it("does not see a queue's delivery target, which an admin key does", async () => {
    const delivered = uniqueName('tenant-bound-target');
    const target = { target: 'cloudflare-queue' as const, binding: 'DELIVERY_QUEUE_TEST' };
    await success(api.v1.queues[':queue'].$put({ param: { queue: delivered }, json: { delivery: target } }));
    await enqueueJob(delivered, { tenant: mine, payload: { run: false } });
    // Nothing drains this queue here: the job stays queued, the queue listed.

    const asTenant = await success(bound.v1.queues[':queue'].$get({ param: { queue: delivered } }));
    const asAdmin = await success(api.v1.queues[':queue'].$get({ param: { queue: delivered } }));
    const listed = (await success(bound.v1.queues.$get())).queues.find((queue) => queue.queue === delivered);

    expect(asTenant).toMatchObject({ name: delivered, custom: true });
    expect('delivery' in asTenant).toBe(false);
    expect(asAdmin.delivery).toEqual(target);
    expect(listed).toBeDefined();
    expect('delivery' in listed!).toBe(false);
  });

  it("counts only its own tenant's running jobs of a queue", async () => {
    const shared = uniqueName('tenant-bound-shared');
    await enqueueJob(shared, { tenant: theirs });
    await enqueueJob(shared, { tenant: theirs });
    await enqueueJob(shared, { tenant: mine });
    for (let i = 0; i < 3; i++) await claimOne(shared, ADMIN_TOKEN);

    const seenBound = await success(bound.v1.queues[':queue'].$get({ param: { queue: shared } }));
    const seenAdmin = await success(client().v1.queues[':queue'].$get({ param: { queue: shared } }));

    expect(seenBound.running).toBe(1);
    expect(seenAdmin.running).toBe(3);
  });

  it("claims only its tenant's jobs, and cannot complete another tenant's", async () => {
    const claimQueue = uniqueName('tenant-bound-claim');
    await enqueueJob(claimQueue, { tenant: theirs });
    const theirsClaimed = await claimOne(claimQueue, ADMIN_TOKEN);
    // Waiting, and not the bound key's to claim.
    await enqueueJob(claimQueue, { tenant: theirs });
    const own = await enqueueJob(claimQueue, { tenant: mine });

    const claimed = await success(
      bound.v1.queues[':queue'].claim.$post({ param: { queue: claimQueue }, json: { max: 10, workerId: 'w' } }),
    );
    const completeTheirs = await bound.v1.jobs[':id'].complete.$post({
      param: { id: theirsClaimed.id },
      json: { leaseToken: theirsClaimed.leaseToken },
    });
    const stillRunning = await success(api.v1.jobs[':id'].$get({ param: { id: theirsClaimed.id }, query: {} }));

    expect(claimed.jobs.map((job) => job.id)).toEqual([own.id]);
    expect(completeTheirs.status).toBe(404);
    expect(stillRunning).toMatchObject({ status: 'running' });
  });

  it('enqueues for its own tenant, and refuses another', async () => {
    const implicit = await enqueueJob(queue, {}, key);
    const refused = await request(`/v1/queues/${queue}/jobs`, {
      method: 'POST',
      apiKey: key,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tenant: theirs }),
    });

    expect(implicit.tenant).toBe(mine);
    expect(await problemOf(refused)).toMatchObject({ status: 403, errors: [{ path: 'tenant' }] });
  });

  it("has dedup keys of its own: another tenant's job with the same key neither blocks nor answers it", async () => {
    const dedupQueue = uniqueName('tenant-bound-dedup');
    const enqueueOnly = await createKey(['enqueue'], mine);
    const theirsJob = await success(
      api.v1.queues[':queue'].jobs.$post({
        param: { queue: dedupQueue },
        json: { tenant: theirs, dedupKey: 'shared' },
        header: {},
      }),
    );

    const batch = await request(`/v1/queues/${dedupQueue}/jobs/batch`, {
      method: 'POST',
      apiKey: enqueueOnly,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jobs: [{ payload: 'new' }, { dedupKey: 'shared' }] }),
    });
    const again = await request(`/v1/queues/${dedupQueue}/jobs`, {
      method: 'POST',
      apiKey: enqueueOnly,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ dedupKey: 'shared', payload: 'secret of mine' }),
    });
    const listed = await success(api.v1.jobs.$get({ query: { queue: dedupQueue } }));

    expect(batch.status).toBe(201);
    const [, ownShared] = ((await batch.json()) as { jobs: EnqueuedJob[] }).jobs;
    expect(ownShared).toMatchObject({ tenant: mine, deduplicated: false });
    expect(ownShared!.id).not.toBe(theirsJob.id);
    // Its own tenant's job, but this key may not read jobs: id and status only.
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({
      id: ownShared!.id,
      status: 'queued',
      statusUrl: expect.any(String),
      deduplicated: true,
      debounced: false,
      replaced: false,
    });
    expect(listed.jobs).toHaveLength(3);
  });

  it("sees only its tenant's rows in the stats", async () => {
    await enqueueJob(queue, { tenant: mine });
    await enqueueJob(queue, { tenant: theirs });

    const { stats } = await success(bound.v1.stats.$get());

    expect(new Set(stats.map((row) => row.tenant))).toEqual(new Set([mine]));
  });
});
