import { describe, expect, it, vi } from 'vitest';
import { toDatabaseError } from '../../../src/db/errors';
import type { Db } from '../../../src/db/types';
import { createApp } from '../../../src/http/app';
import { appDeps } from '../support/databases';
import {
  ADMIN_TOKEN,
  BASE_URL,
  claimOne,
  client,
  enqueueJob,
  problemOf,
  request,
  success,
  uniqueName,
} from './support/api';
import { fetchApp, fetchWithEnv } from './support/invoke';

const api = client();

/** A database whose every statement throws `error`. */
function failingDatabase(error: Error): Db {
  const fail = async (): Promise<never> => {
    throw error;
  };
  return { query: fail, transaction: fail, close: async () => {} };
}

describe('GET /v1/queues and /v1/stats', () => {
  it('count jobs per queue and status, with the oldest wait', async () => {
    const queue = uniqueName('counts');
    const tenant = uniqueName('counts-tenant');
    await enqueueJob(queue, { tenant });
    await enqueueJob(queue, { tenant });
    await enqueueJob(queue);
    await claimOne(queue);

    const { queues } = await success(api.v1.queues.$get());
    const { stats } = await success(api.v1.stats.$get());

    expect(queues.find((summary) => summary.queue === queue)).toMatchObject({
      counts: { queued: 2, running: 1, scheduled: 0, succeeded: 0 },
      oldestWaitSeconds: expect.any(Number),
    });
    const tenantRows = stats.filter((row) => row.queue === queue && row.tenant === tenant);
    expect(tenantRows.reduce((sum, row) => sum + row.count, 0)).toBe(2);
  });
});

describe('queue settings', () => {
  it("sets and reads back a queue's cap and weight; a claim keeps the cap", async () => {
    const queue = uniqueName('capped');
    const before = await success(api.v1.queues[':queue'].$get({ param: { queue } }));
    const put = await success(api.v1.queues[':queue'].$put({ param: { queue }, json: { concurrency: 1, weight: 4 } }));
    await enqueueJob(queue);
    await enqueueJob(queue);
    const claim = () =>
      success(api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'w', max: 2 } }));
    // A drain that another request woke may hold the capped queue's row for a moment, and a claim
    // that finds it held leaves the queue to the next claim: claim until one is served.
    let first: Awaited<ReturnType<typeof claim>> = { jobs: [] };
    await expect.poll(async () => (first = await claim()).jobs.length).not.toBe(0);
    const second = await claim();
    const after = await success(api.v1.queues[':queue'].$get({ param: { queue } }));
    const reset = await success(api.v1.queues[':queue'].$put({ param: { queue }, json: {} }));

    expect(before).toEqual({
      name: queue,
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
    expect(put).toEqual({
      name: queue,
      concurrency: 1,
      weight: 4,
      delivery: null,
      pausedAt: null,
      retentionSeconds: null,
      deadLetterQueue: null,
      rateLimit: null,
      custom: true,
      running: 0,
      startsInWindow: null,
    });
    expect(first.jobs).toHaveLength(1);
    expect(second.jobs).toEqual([]);
    expect(after).toEqual({ ...put, running: 1 });
    expect(reset).toMatchObject({ concurrency: null, weight: 1, custom: true, running: 1 });
  });

  it('pauses a queue (claims take none of its jobs, its cap stays) and resumes it', async () => {
    const queue = uniqueName('paused');
    await success(api.v1.queues[':queue'].$put({ param: { queue }, json: { concurrency: 3, weight: 2 } }));
    await enqueueJob(queue);
    const claim = () =>
      success(api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'w', max: 2 } }));

    const paused = await success(api.v1.queues[':queue'].pause.$post({ param: { queue } }));
    const whilePaused = await claim();
    const listed = await success(api.v1.queues.$get());
    const resumed = await success(api.v1.queues[':queue'].resume.$post({ param: { queue } }));
    const afterResume = await claim();

    expect(paused).toMatchObject({ concurrency: 3, weight: 2, pausedAt: expect.any(String) });
    expect(whilePaused.jobs).toEqual([]);
    expect(listed.queues.find((summary) => summary.queue === queue)).toMatchObject({ pausedAt: paused.pausedAt });
    expect(resumed).toMatchObject({ concurrency: 3, weight: 2, pausedAt: null });
    expect(afterResume.jobs).toHaveLength(1);
  });

  it('sets a queue\'s retention, "none" or the default, shown where its settings are', async () => {
    const queue = uniqueName('kept');
    const put = (json: { concurrency?: number; retentionSeconds?: number | 'none' | null }) =>
      success(api.v1.queues[':queue'].$put({ param: { queue }, json }));

    const before = await success(api.v1.queues[':queue'].$get({ param: { queue } }));
    const month = await put({ concurrency: 2, retentionSeconds: 30 * 24 * 3600 });
    const none = await put({ concurrency: 2, retentionSeconds: 'none' });
    await enqueueJob(queue);
    const listed = (await success(api.v1.queues.$get())).queues.find((summary) => summary.queue === queue);
    const refused = await request(`/v1/queues/${queue}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ concurrency: 5, retentionSeconds: 30 }),
    });
    const afterRefusal = await success(api.v1.queues[':queue'].$get({ param: { queue } }));
    const itself = await request(`/v1/queues/${queue}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ concurrency: 5, deadLetterQueue: queue }),
    });
    const reset = await put({ concurrency: 2 });

    expect(before).toMatchObject({ retentionSeconds: null, custom: false });
    expect(month).toMatchObject({ retentionSeconds: 2_592_000, concurrency: 2, custom: true });
    expect(none).toMatchObject({ retentionSeconds: 'none' });
    expect(listed).toMatchObject({ retentionSeconds: 'none', concurrency: 2 });
    expect(await problemOf(refused)).toMatchObject({
      status: 400,
      errors: [{ path: 'retentionSeconds', message: expect.stringContaining('"none"') }],
    });
    expect(await problemOf(itself)).toMatchObject({ status: 400, errors: [{ path: 'deadLetterQueue' }] });
    expect(afterRefusal).toMatchObject({ retentionSeconds: 'none', concurrency: 2 });
    expect(await success(api.v1.queues[':queue'].$get({ param: { queue } }))).toMatchObject({
      concurrency: 2,
      deadLetterQueue: null,
    });
    expect(reset).toMatchObject({ retentionSeconds: null });
  });

  it("names a dead-letter queue: a job that fails for good there waits again in it, and leaves the queue's dead set", async () => {
    const queue = uniqueName('letters');
    const deadLetters = `${queue}-dead`;
    const set = await success(
      api.v1.queues[':queue'].$put({ param: { queue }, json: { deadLetterQueue: deadLetters } }),
    );
    const { id } = await enqueueJob(queue);
    const claimed = await claimOne(queue);
    await success(
      api.v1.jobs[':id'].fail.$post({
        param: { id },
        json: { leaseToken: claimed.leaseToken, error: { message: 'bounced' }, forGood: true },
      }),
    );

    expect(set).toMatchObject({ deadLetterQueue: deadLetters, custom: true });
    expect(await success(api.v1.jobs[':id'].$get({ param: { id }, query: {} }))).toMatchObject({
      queue: deadLetters,
      status: 'queued',
      attempts: 0,
      lastError: { message: 'bounced' },
    });
    const dead = await success(api.v1['dead-jobs'].$get({ query: { queue } }));
    expect(dead.jobs).toEqual([]);
    const listed = (await success(api.v1.queues.$get())).queues.find((summary) => summary.queue === deadLetters);
    expect(listed).toMatchObject({ counts: { queued: 1 }, deadLetterQueue: null });
  });

  it.each([
    [{ retentionSeconds: 59 }, 'retentionSeconds'],
    [{ deadLetterQueue: '' }, 'deadLetterQueue'],
    [{ deadLetterQueue: 'a\u0007b' }, 'deadLetterQueue'],
    [{ deadLetterQueue: 7 }, 'deadLetterQueue'],
    [{ retentionSeconds: 0 }, 'retentionSeconds'],
    [{ retentionSeconds: 3600.5 }, 'retentionSeconds'],
    [{ retentionSeconds: 'forever' }, 'retentionSeconds'],
    [{ retentionSeconds: '3600' }, 'retentionSeconds'],
    [{ retentionSeconds: 315_360_001 }, 'retentionSeconds'],
    [{ weight: 0 }, 'weight'],
    [{ weight: 1001 }, 'weight'],
    [{ concurrency: -1 }, 'concurrency'],
    [{ concurrency: 1.5 }, 'concurrency'],
    [{ concurrency: '3' }, 'concurrency'],
    [{ cap: 3 }, 'cap'],
    [{ delivery: { target: 'sqs', url: 'https://hooks.example.com/' } }, 'delivery.target'],
    [{ delivery: { target: 'webhook', url: 'ftp://hooks.example.com/' } }, 'delivery.url'],
    [{ delivery: { target: 'webhook', url: 'https://10.1.2.3/in' } }, 'delivery.url'],
    // This Worker's HTTP_ALLOWED_HOSTS is empty.
    [{ delivery: { target: 'webhook', url: 'https://hooks.example.com/' } }, 'delivery.url'],
    [
      { delivery: { target: 'cloudflare-queue', binding: 'DELIVERY_QUEUE_TEST', delaySeconds: 43_201 } },
      'delivery.delaySeconds',
    ],
    [{ delivery: { target: 'cloudflare-queue', binding: 'TEST_QUEUE' } }, 'delivery.binding'],
    [{ delivery: { target: 'webhook', url: 'https://user:password@hooks.example.com/' } }, 'delivery.url'],
    [{ delivery: { target: 'cloudflare-queue', binding: 'DATABASE_URL' } }, 'delivery.binding'],
    [{ delivery: { target: 'cloudflare-queue', binding: '1ABC' } }, 'delivery.binding'],
  ])('refuses %j, changing nothing', async (body, path) => {
    const queue = uniqueName('queue');
    const response = await request(`/v1/queues/${queue}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

    const problem = await problemOf(response);
    expect(problem.status).toBe(400);
    expect(problem.errors?.[0]?.path).toBe(path);
    expect(await success(api.v1.queues[':queue'].$get({ param: { queue } }))).toMatchObject({ custom: false });
  });
});

describe("a job type's retention", () => {
  it('is set by an operator, kept, listed and handed back; a bad one is refused by name, changing nothing', async () => {
    const type = uniqueName('digest');
    const route = api.v1['job-types'][':type'].retention;
    const set = await success(route.$put({ param: { type }, json: { retentionSeconds: 'none' } }));
    const refusals = await Promise.all(
      [{ retentionSeconds: 59 }, { retentionSeconds: '3600' }, {}, { retentionSeconds: 3600, extra: 1 }].map((body) =>
        request(`/v1/job-types/${type}/retention`, {
          method: 'PUT',
          apiKey: ADMIN_TOKEN,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      ),
    );
    const tooLong = await request(`/v1/job-types/${'t'.repeat(129)}/retention`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ retentionSeconds: 3600 }),
    });
    const listed = (await success(api.v1['job-types'].$get())).jobTypes.find((entry) => entry.type === type);
    const handedBack = await success(route.$delete({ param: { type } }));

    expect(set).toMatchObject({ type, retentionSeconds: 'none', setBy: 'operator', updatedAt: expect.any(String) });
    for (const refused of refusals) {
      const problem = await problemOf(refused);
      expect(problem.status).toBe(400);
      expect(problem.errors?.[0]?.path).toMatch(/^(retentionSeconds|extra)$/);
    }
    expect((await problemOf(tooLong)).status).toBe(400);
    expect(listed).toMatchObject({ retentionSeconds: 'none', setBy: 'operator' });
    expect(handedBack).toMatchObject({ type, retentionSeconds: null, setBy: 'definition' });
  });
});

describe("a queue's webhook target", () => {
  const secrets = {
    DELIVERY_SECRET_HOOK: `whsec_${btoa('the receiver secret of the operations tests')}`,
    DELIVERY_SECRET_PLAIN: 'plain',
  };
  const put = (queue: string, delivery: unknown) =>
    fetchWithEnv(
      { HTTP_ALLOWED_HOSTS: 'hooks.example.com', ...secrets } as Partial<Cloudflare.Env>,
      `${BASE_URL}/v1/queues/${queue}`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ delivery }),
      },
    );

  it('is kept when its host is allowed and its secret is set; a secret that is missing or not a whsec_ one is refused', async () => {
    const queue = uniqueName('hooked');
    const target = {
      target: 'webhook',
      url: 'https://hooks.example.com/skiplock',
      secretName: 'DELIVERY_SECRET_HOOK',
      batchSize: 25,
    };
    const accepted = await put(queue, target);
    expect(accepted.status).toBe(200);
    expect(await accepted.json()).toMatchObject({ name: queue, delivery: target, custom: true });

    for (const secretName of ['DELIVERY_SECRET_NOT_SET', 'DELIVERY_SECRET_PLAIN', 'ADMIN_TOKEN']) {
      const problem = await problemOf(await put(queue, { ...target, secretName }));
      expect(problem).toMatchObject({ status: 400, errors: [{ path: 'delivery.secretName' }] });
    }
    expect(
      (await problemOf(await put(queue, { ...target, url: 'https://other.example.com/' }))).errors?.[0]?.path,
    ).toBe('delivery.url');
    expect(await success(api.v1.queues[':queue'].$get({ param: { queue } }))).toMatchObject({ delivery: target });
    // Unchanged, the kept target is not checked again: the cap still changes where the Worker could no longer reach it.
    const capped = await request(`/v1/queues/${queue}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ concurrency: 2, delivery: target }),
    });
    expect(capped.status).toBe(200);
    expect(await capped.json()).toMatchObject({ concurrency: 2, delivery: target });
  });
});

describe('tenants', () => {
  it('sets and reads back a tenant, which runs on the defaults until then', async () => {
    const tenant = uniqueName('tenant');
    const before = await success(api.v1.tenants[':tenant'].$get({ param: { tenant } }));

    const settings = { concurrency: 5, rateLimit: { count: 10, perSeconds: 60 }, weight: 3 };
    const put = await success(api.v1.tenants[':tenant'].$put({ param: { tenant }, json: settings }));
    const after = await success(api.v1.tenants[':tenant'].$get({ param: { tenant } }));
    const reset = await success(api.v1.tenants[':tenant'].$put({ param: { tenant }, json: {} }));

    expect(before).toMatchObject({ name: tenant, custom: false, running: 0 });
    expect(put).toEqual({ name: tenant, ...settings, custom: true, running: 0 });
    expect(after).toEqual(put);
    expect(reset).toMatchObject({ concurrency: null, rateLimit: null, weight: 1, custom: true });
  });

  it.each([
    [{ weight: 0 }, 'weight'],
    [{ concurrency: -1 }, 'concurrency'],
    [{ rateLimit: { count: 5 } }, 'rateLimit.perSeconds'],
    [{ rateLimit: { count: 5, perSeconds: 0 } }, 'rateLimit.perSeconds'],
  ])('refuses %j', async (body, path) => {
    const response = await request(`/v1/tenants/${uniqueName('tenant')}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

    expect((await problemOf(response)).errors?.[0]?.path).toBe(path);
  });
});

describe('GET /v1/openapi.json', () => {
  it('documents every route and the schemas, without a key', async () => {
    const response = await request('/v1/openapi.json');
    const document = await response.json<{
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, unknown> };
    }>();

    expect(response.status).toBe(200);
    const routes = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(routes).toEqual(
      expect.arrayContaining([
        'DELETE /v1/keys/{id}',
        'GET /healthz',
        'GET /v1/jobs',
        'GET /v1/jobs/{id}',
        'GET /v1/jobs/{id}/events',
        'GET /v1/keys',
        'GET /v1/queues',
        'GET /v1/queues/{queue}',
        'GET /v1/stats',
        'GET /v1/tenants/{tenant}',
        'POST /v1/jobs/{id}/cancel',
        'POST /v1/jobs/{id}/complete',
        'POST /v1/jobs/{id}/extend',
        'POST /v1/jobs/{id}/fail',
        'POST /v1/jobs/{id}/release',
        'POST /v1/jobs/{id}/retry',
        'POST /v1/keys',
        'POST /v1/queues/{queue}/claim',
        'POST /v1/queues/{queue}/jobs',
        'POST /v1/queues/{queue}/jobs/batch',
        'PUT /v1/queues/{queue}',
        'PUT /v1/tenants/{tenant}',
      ]),
    );
    expect(Object.keys(document.components.schemas)).toEqual(
      expect.arrayContaining(['Job', 'EnqueueRequest', 'ClaimedJob', 'Problem']),
    );
  });
});

describe('every response', () => {
  it('carries an x-request-id, echoing a well-formed one the client sent', async () => {
    const generated = await request('/healthz');
    const echoed = await request('/healthz', { headers: { 'x-request-id': 'trace-123' } });
    const replaced = await request('/healthz', { headers: { 'x-request-id': 'bad id!' } });

    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(echoed.headers.get('x-request-id')).toBe('trace-123');
    expect(replaced.headers.get('x-request-id')).not.toBe('bad id!');
  });

  it('is a problem with the request id for an unknown route', async () => {
    const response = await request('/v2/nothing', { headers: { 'x-request-id': 'lost-1' } });

    expect(await problemOf(response)).toMatchObject({ status: 404, requestId: 'lost-1' });
    expect(response.headers.get('x-request-id')).toBe('lost-1');
  });
});

describe('failures', () => {
  it('answers 503 with Retry-After when the database is unreachable', async () => {
    // What every driver throws when it cannot reach the server.
    const unreachable = toDatabaseError(new TypeError('fetch failed'));
    const app = createApp(appDeps({ database: () => failingDatabase(unreachable) }));

    const response = await fetchApp(
      app,
      new Request(`${BASE_URL}/v1/jobs`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
    );

    expect(await problemOf(response)).toMatchObject({
      status: 503,
      type: expect.stringMatching(/database-unavailable$/),
    });
    expect(response.headers.get('retry-after')).toBe('5');
  });

  it("answers a database's refusal without its words, which go to the log under the request id", async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const refusal = toDatabaseError(
      Object.assign(new Error('value "9999999999999999999" is out of range for type bigint'), { code: '22003' }),
    );
    const app = createApp(appDeps({ database: () => failingDatabase(refusal) }));

    const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-request-id': 'refused-1' };
    const response = await fetchApp(app, new Request(`${BASE_URL}/v1/jobs`, { headers }));

    const problem = await problemOf(response);
    expect(problem).toMatchObject({
      status: 400,
      requestId: 'refused-1',
      detail: 'a value in the request is outside what the database accepts',
    });
    expect(JSON.stringify(problem)).not.toMatch(/bigint|9999/);
    expect(JSON.parse(String(log.mock.calls.at(-1)?.[0]))).toMatchObject({
      event: 'database_error',
      requestId: 'refused-1',
      error: { message: expect.stringContaining('out of range for type bigint') },
    });
    log.mockRestore();
  });

  it('answers 503 only for a connection failure: an error without a SQLSTATE is otherwise a 500, its message kept from the client', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const answer = async (error: unknown) => {
      const app = createApp(appDeps({ database: () => failingDatabase(toDatabaseError(error)) }));
      const response = await fetchApp(
        app,
        new Request(`${BASE_URL}/v1/jobs`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      );
      return problemOf(response);
    };

    const connectionFailures = [
      new Error('Connection terminated unexpectedly'),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Error connecting to database: TypeError: fetch failed'),
      new Error('Server error (HTTP status 502): bad gateway'),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
    ];
    for (const error of connectionFailures) {
      expect(await answer(error), (error as Error).message).toMatchObject({
        status: 503,
        detail: 'the database cannot be reached right now; retry in 5 s',
      });
    }
    const bug = await answer(new TypeError("Cannot read properties of undefined (reading 'rows')"));
    expect(bug).toMatchObject({ status: 500, detail: expect.stringContaining(bug.requestId) });
    expect(bug.detail).not.toContain('rows');
    log.mockRestore();
  });

  it('answers an unexpected error with a 500 problem carrying the request id, and logs it', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const app = createApp(appDeps({ database: () => failingDatabase(new TypeError('a bug')) }));

    const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-request-id': 'bug-1' };
    const response = await fetchApp(app, new Request(`${BASE_URL}/v1/jobs`, { headers }));

    expect(await problemOf(response)).toMatchObject({
      status: 500,
      requestId: 'bug-1',
      detail: expect.stringContaining('bug-1'),
    });
    expect(JSON.parse(String(log.mock.calls.at(-1)?.[0]))).toMatchObject({
      level: 'error',
      event: 'unexpected_error',
      requestId: 'bug-1',
      error: { name: 'TypeError', message: 'a bug' },
    });
    log.mockRestore();
  });

  it('logs no line per request by default, and errors only', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});

    await request('/healthz', { headers: { 'x-request-id': 'quiet-1' } });

    expect(log.mock.calls.filter(([line]) => String(line).includes('quiet-1'))).toEqual([]);
    log.mockRestore();
  });

  it('with LOG_LEVEL=info logs one JSON line per request, with its caller and without the query string', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const verbose = (path: string, headers: Record<string, string>) =>
      fetchWithEnv({ LOG_LEVEL: 'info' }, new URL(path, BASE_URL).href, { headers });

    await verbose('/healthz?token=secret', { 'x-request-id': 'logged-1' });
    await verbose('/v1/stats', { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-request-id': 'logged-2' });

    const lines = log.mock.calls.map((call) => JSON.parse(String(call[0])));
    expect(lines.find((line) => line.requestId === 'logged-1')).toEqual({
      level: 'info',
      event: 'request',
      requestId: 'logged-1',
      method: 'GET',
      path: '/healthz',
      status: 200,
      ms: expect.any(Number),
      caller: null,
    });
    expect(lines.find((line) => line.requestId === 'logged-2')).toMatchObject({
      path: '/v1/stats',
      caller: 'admin-token',
    });
    log.mockRestore();
  });
});
