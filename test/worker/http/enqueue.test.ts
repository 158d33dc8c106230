import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { createApp } from '../../../src/http/app';
import { appDeps } from '../support/databases';
import {
  ADMIN_TOKEN,
  BASE_URL,
  client,
  createKey,
  expectStatus,
  problemOf,
  request,
  uniqueName,
  type EnqueuedJob,
} from './support/api';
import { jobCount } from './support/database';
import { fetchApp, fetchWithEnv } from './support/invoke';

const api = client();

function postJob(queue: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return request(`/v1/queues/${encodeURIComponent(queue)}/jobs`, {
    method: 'POST',
    apiKey: ADMIN_TOKEN,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

function postBatch(queue: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return request(`/v1/queues/${encodeURIComponent(queue)}/jobs/batch`, {
    method: 'POST',
    apiKey: ADMIN_TOKEN,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

describe('POST /v1/queues/{queue}/jobs', () => {
  it('answers 201 with the job, its statusUrl and a Location', async () => {
    const queue = uniqueName('enqueue');
    const json = { payload: { to: 'a@example.test' } };
    const response = await api.v1.queues[':queue'].jobs.$post({ param: { queue }, json, header: {} });

    expect(response.status).toBe(201);
    if (response.status !== 201) return;
    const job = await response.json();
    expect(job).toMatchObject({
      queue,
      type: queue,
      tenant: 'default',
      status: 'queued',
      priority: 0,
      payload: { to: 'a@example.test' },
      attempts: 0,
      maxAttempts: 5,
      deduplicated: false,
    });
    expect(response.headers.get('location')).toBe(`/v1/jobs/${job.id}`);
    expect(job.statusUrl).toMatch(new RegExp(`^${BASE_URL}/v1/jobs/${job.id}\\?token=v1\\.\\d+\\.[\\w-]{43}$`));
  });

  it('takes every option of the body', async () => {
    const queue = uniqueName('enqueue-options');
    const response = await postJob(queue, {
      type: 'send-email',
      tenant: uniqueName('tenant'),
      priority: 7,
      delaySeconds: 3600,
      maxAttempts: 2,
      leaseSeconds: 30,
      ttlSeconds: 7200,
      backoffBaseSeconds: 2,
      backoffMaxSeconds: 60,
    });

    expect(response.status).toBe(201);
    const job = await response.json<EnqueuedJob>();
    expect(job).toMatchObject({
      type: 'send-email',
      priority: 7,
      status: 'scheduled',
      maxAttempts: 2,
      leaseSeconds: 30,
    });
    expect(Date.parse(job.runAt) - Date.parse(job.createdAt)).toBeCloseTo(3_600_000, -3);
    expect(Date.parse(job.expiresAt!) - Date.parse(job.createdAt)).toBeCloseTo(7_200_000, -3);
  });

  it('answers 200 with the same job when a dedup key matches', async () => {
    const queue = uniqueName('enqueue-dedup');
    const first = await (await postJob(queue, { dedupKey: 'order-1' })).json<EnqueuedJob>();

    const second = await postJob(queue, { dedupKey: 'order-1', payload: 'ignored' });

    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ id: first.id, deduplicated: true, payload: null });
    expect(await jobCount(queue)).toBe(1);
  });

  it('answers a retried request with the same Idempotency-Key with the first job', async () => {
    const queue = uniqueName('enqueue-idempotent');
    const first = await postJob(queue, { payload: 1 }, { 'idempotency-key': 'request-42' });
    const retried = await postJob(queue, { payload: 1 }, { 'idempotency-key': 'request-42' });
    const other = await postJob(queue, { payload: 1 }, { 'idempotency-key': 'request-43' });

    expect([first.status, retried.status, other.status]).toEqual([201, 200, 201]);
    const firstJob = await first.json<EnqueuedJob>();
    const retriedJob = await retried.json<EnqueuedJob>();
    const otherJob = await other.json<EnqueuedJob>();
    expect(retriedJob).toMatchObject({ id: firstJob.id, deduplicated: true });
    expect(otherJob.id).not.toBe(firstJob.id);
    expect(await jobCount(queue)).toBe(2);
  });

  it('keeps the Idempotency-Keys of two tenants apart', async () => {
    const queue = uniqueName('enqueue-idempotent-tenants');
    const a = await postJob(queue, { tenant: uniqueName('a') }, { 'idempotency-key': 'same' });
    const b = await postJob(queue, { tenant: uniqueName('b') }, { 'idempotency-key': 'same' });

    expect([a.status, b.status]).toEqual([201, 201]);
  });

  it('keeps the dedup keys of two tenants apart', async () => {
    const queue = uniqueName('enqueue-dedup-tenants');
    const a = await postJob(queue, { tenant: uniqueName('a'), dedupKey: 'order-1' });
    const b = await postJob(queue, { tenant: uniqueName('b'), dedupKey: 'order-1' });

    expect([a.status, b.status]).toEqual([201, 201]);
    expect(await jobCount(queue)).toBe(2);
  });

  it("answers a dedup hit to a key without the read scope with the job's id and status only", async () => {
    const queue = uniqueName('enqueue-dedup-no-read');
    const tenant = uniqueName('victim');
    const original = await (
      await postJob(queue, { tenant, dedupKey: 'order-1', payload: { card: '4242' } })
    ).json<EnqueuedJob>();
    const enqueueOnly = await createKey(['enqueue']);
    const asEnqueuer = (body: unknown, headers: Record<string, string> = {}) =>
      request(`/v1/queues/${queue}/jobs`, {
        method: 'POST',
        apiKey: enqueueOnly,
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });

    const hit = await asEnqueuer({ tenant, dedupKey: 'order-1' });
    const first = await asEnqueuer({ tenant, payload: { card: '4242' } }, { 'idempotency-key': 'k-1' });
    const retried = await asEnqueuer({ tenant }, { 'idempotency-key': 'k-1' });

    expect(hit.status).toBe(200);
    expect(await hit.json()).toEqual({
      id: original.id,
      status: 'queued',
      statusUrl: expect.any(String),
      deduplicated: true,
      debounced: false,
      replaced: false,
    });
    expect(first.status).toBe(201);
    const firstJob = await first.json<EnqueuedJob>();
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual({
      id: firstJob.id,
      status: 'queued',
      statusUrl: expect.any(String),
      deduplicated: true,
      debounced: false,
      replaced: false,
    });
  });

  it('refuses a dedupKey together with an Idempotency-Key, and the reserved dedup prefix', async () => {
    const queue = uniqueName('enqueue-dedup-refused');
    const both = await problemOf(await postJob(queue, { dedupKey: 'k' }, { 'idempotency-key': 'k' }));
    const reserved = await problemOf(await postJob(queue, { dedupKey: 'idempotency-key:["default","k"]' }));

    expect(both.errors).toEqual([{ path: 'dedupKey', message: expect.any(String) }]);
    expect(reserved.errors).toEqual([{ path: 'dedupKey', message: expect.stringContaining('idempotency-key:') }]);
    expect(await jobCount(queue)).toBe(0);
  });

  it.each([
    ['an unknown field', { priorty: 1 }, 'priorty'],
    ['a priority out of range', { priority: 1001 }, 'priority'],
    ['runAt with delaySeconds', { runAt: '2030-01-01T00:00:00Z', delaySeconds: 1 }, 'delaySeconds'],
    ['expiresAt with ttlSeconds', { expiresAt: '2030-01-01T00:00:00Z', ttlSeconds: 1 }, 'ttlSeconds'],
    ['a runAt that is no timestamp', { runAt: 'tomorrow' }, 'runAt'],
    ['a type with a control character', { type: 'a\nb' }, 'type'],
    ['a payload holding \\u0000', { payload: { text: 'a\u0000b' } }, 'payload'],
    ['a payload nested too deep', { payload: JSON.parse('['.repeat(70) + ']'.repeat(70)) }, 'payload'],
    ['a body that is not an object', [1, 2], 'body'],
  ])('answers 400 naming the field for %s', async (_, body, path) => {
    const queue = uniqueName('enqueue-invalid');
    const response = await postJob(queue, body);

    expect(response.status).toBe(400);
    const problem = await problemOf(response);
    expect(problem).toMatchObject({
      type: 'https://skiplock.dev/problems/validation-failed',
      title: 'Invalid request',
    });
    expect(problem.errors?.map((error) => error.path)).toContain(path);
    expect(await jobCount(queue)).toBe(0);
  });

  it('answers 400 naming the field for a runAt or expiresAt before 2000 or more than ten years ahead', async () => {
    const queue = uniqueName('enqueue-time-range');
    const elevenYears = new Date(Date.now() + 11 * 365 * 86_400_000).toISOString();
    const cases = [
      [{ runAt: '0001-01-01T00:00:00Z' }, 'runAt'],
      [{ runAt: '1999-12-31T23:59:59Z' }, 'runAt'],
      [{ runAt: elevenYears }, 'runAt'],
      [{ expiresAt: '0001-01-01T00:00:00Z' }, 'expiresAt'],
      [{ expiresAt: elevenYears }, 'expiresAt'],
    ] as const;
    for (const [body, field] of cases) {
      const problem = await problemOf(await postJob(queue, body));
      expect(problem, JSON.stringify(body)).toMatchObject({
        status: 400,
        errors: [{ path: field, message: expect.stringMatching(/^must be from 2000-01-01 to 10 years from now$/) }],
      });
    }
    expect(
      (
        await postJob(queue, {
          runAt: '2000-01-01T00:00:00Z',
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        })
      ).status,
    ).toBe(201);
    expect(await jobCount(queue)).toBe(1);
  });

  it('answers 400 for a queue name that is too long', async () => {
    const response = await postJob('q'.repeat(129), {});

    expect(response.status).toBe(400);
    expect((await problemOf(response)).errors?.[0]?.path).toBe('queue');
  });

  it('answers 400 for malformed JSON and 415 for a body that is not JSON', async () => {
    const queue = uniqueName('enqueue-malformed');
    const malformed = await request(`/v1/queues/${queue}/jobs`, {
      method: 'POST',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: '{"payload": ',
    });
    const notJson = await request(`/v1/queues/${queue}/jobs`, {
      method: 'POST',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'text/plain' },
      body: 'hello',
    });

    expect((await problemOf(malformed)).status).toBe(400);
    expect((await problemOf(notJson)).status).toBe(415);
  });

  it('answers 413 for a payload over 256 KiB, naming it', async () => {
    const queue = uniqueName('enqueue-large');
    const response = await postJob(queue, { payload: 'x'.repeat(256 * 1024) });

    expect(response.status).toBe(413);
    const { errors } = await problemOf(response);
    expect(errors).toEqual([{ path: 'payload', message: expect.stringMatching(/bytes of JSON/) }]);
    expect(await jobCount(queue)).toBe(0);
  });

  it('answers 413 for a body over MAX_BODY_BYTES, whether its length is declared or streamed', async () => {
    const queue = uniqueName('enqueue-body-limit');
    const declared = await postJob(queue, { payload: 'x'.repeat(2 * 1024 * 1024) });
    const small = await fetchWithEnv({ MAX_BODY_BYTES: '100' }, `${BASE_URL}/v1/queues/${queue}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      // A stream has no Content-Length: the limit is counted as the bytes arrive.
      body: new Blob([JSON.stringify({ payload: 'x'.repeat(200) })]).stream(),
    });

    expect((await problemOf(declared)).status).toBe(413);
    expect((await problemOf(small)).status).toBe(413);
    expect(await jobCount(queue)).toBe(0);
  });
});

describe('POST /v1/queues/{queue}/jobs/batch', () => {
  it('enqueues the jobs in request order, each with its statusUrl', async () => {
    const queue = uniqueName('batch');
    const response = await api.v1.queues[':queue'].jobs.batch.$post({
      param: { queue },
      json: { jobs: [{ payload: 1 }, { payload: 2 }, { payload: 3, priority: 5 }] },
      header: {},
    });

    expectStatus(response, 201);
    const { jobs } = await response.json();
    expect(jobs.map((job) => ('payload' in job ? job.payload : 'no payload'))).toEqual([1, 2, 3]);
    expect(jobs.every((job) => job.statusUrl?.includes(job.id) && !job.deduplicated)).toBe(true);
  });

  it('refuses the whole batch for one bad job, naming its field, and creates nothing', async () => {
    const queue = uniqueName('batch-atomic');
    const jobs = Array.from({ length: 50 }, (_, index) => ({ payload: index, priority: index === 37 ? 5000 : 0 }));

    const response = await postBatch(queue, { jobs });

    expect(response.status).toBe(400);
    expect((await problemOf(response)).errors).toEqual([{ path: 'jobs.37.priority', message: expect.any(String) }]);
    expect(await jobCount(queue)).toBe(0);
  });

  it('refuses an empty batch and one over 1,000 jobs', async () => {
    const queue = uniqueName('batch-size');
    const empty = await problemOf(await postBatch(queue, { jobs: [] }));
    const tooMany = await problemOf(await postBatch(queue, { jobs: Array.from({ length: 1001 }, () => ({})) }));

    expect(empty.errors?.[0]?.path).toBe('jobs');
    expect(tooMany.errors?.[0]?.path).toBe('jobs');
    expect(await jobCount(queue)).toBe(0);
  });

  it('takes 1,000 jobs in one request', async () => {
    const queue = uniqueName('batch-full');
    const response = await postBatch(queue, { jobs: Array.from({ length: 1000 }, (_, index) => ({ payload: index })) });

    expect(response.status).toBe(201);
    expect(await jobCount(queue)).toBe(1000);
  });

  it('answers a retried batch with the same Idempotency-Key with the same jobs, 200', async () => {
    const queue = uniqueName('batch-idempotent');
    const body = { jobs: [{ payload: 'a' }, { payload: 'b' }] };
    const first = await postBatch(queue, body, { 'idempotency-key': 'batch-1' });
    const retried = await postBatch(queue, body, { 'idempotency-key': 'batch-1' });

    expect([first.status, retried.status]).toEqual([201, 200]);
    const idsOf = async (response: Response) =>
      (await response.json<{ jobs: EnqueuedJob[] }>()).jobs.map((job) => job.id);
    expect(await idsOf(retried)).toEqual(await idsOf(first));
    expect(await jobCount(queue)).toBe(2);
  });
});

describe('the fast-path hook', () => {
  it('runs after an enqueue that created a job, and not after a dedup hit', async () => {
    const onEnqueued = vi.fn();
    const app = createApp(appDeps({ onEnqueued }));
    const queue = uniqueName('fast-path');
    const enqueue = async () => {
      const response = await fetchApp(
        app,
        new Request(`${BASE_URL}/v1/queues/${queue}/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ dedupKey: 'once' }),
        }),
      );
      return response.status;
    };

    expect(await enqueue()).toBe(201);
    expect(onEnqueued).toHaveBeenCalledTimes(1);
    expect(onEnqueued.mock.calls[0]?.[1]).toBe(env);
    expect(await enqueue()).toBe(200);
    expect(onEnqueued).toHaveBeenCalledTimes(1);
  });
});

describe('completion callback URLs at enqueue', () => {
  /** The Worker with an allow-list: hooks.example.com for every tenant, and one loopback port named outright. */
  const allowList = { HTTP_ALLOWED_HOSTS: 'hooks.example.com, 127.0.0.1:8787' };

  function enqueueWith(queue: string, body: unknown, batch = false): Promise<Response> {
    return fetchWithEnv(allowList, `${BASE_URL}/v1/queues/${queue}/jobs${batch ? '/batch' : ''}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  it('stores a callback URL the http job may deliver to, and shows it on the job', async () => {
    const queue = uniqueName('callbacks');
    const response = await enqueueWith(queue, {
      callbackUrl: 'https://hooks.example.com/done?job=1',
      failureCallbackUrl: 'http://127.0.0.1:8787/failed',
    });

    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({
      callbackUrl: 'https://hooks.example.com/done?job=1',
      failureCallbackUrl: 'http://127.0.0.1:8787/failed',
    });
  });

  it.each([
    [
      'a private address',
      { callbackUrl: 'http://10.0.0.7/done' },
      'callbackUrl',
      /10\.0\.0\.7 is not a public address/,
    ],
    [
      'cloud metadata',
      { failureCallbackUrl: 'http://169.254.169.254/latest' },
      'failureCallbackUrl',
      /not a public address/,
    ],
    [
      'this machine by name',
      { callbackUrl: 'https://localhost/done' },
      'callbackUrl',
      /this machine: never delivered to/,
    ],
    [
      'a host not on the list',
      { callbackUrl: 'https://evil.example.net/' },
      'callbackUrl',
      /not on HTTP_ALLOWED_HOSTS/,
    ],
    ['a port the entry does not name', { callbackUrl: 'https://hooks.example.com:8443/' }, 'callbackUrl', /port 8443/],
    ['another scheme', { callbackUrl: 'ftp://hooks.example.com/x' }, 'callbackUrl', /./],
    ['no URL at all', { failureCallbackUrl: 'hooks.example.com/x' }, 'failureCallbackUrl', /./],
  ])('refuses %s with 400 naming the field, and stores nothing', async (_, body, field, message) => {
    const queue = uniqueName('callbacks-refused');
    const response = await enqueueWith(queue, body);

    const problem = await problemOf(response);
    expect(problem.status).toBe(400);
    expect(problem.errors).toContainEqual({ path: field, message: expect.stringMatching(message) });
    expect(await jobCount(queue)).toBe(0);
  });

  it('refuses a batch whose one job has a refused callback, naming that job, and stores none of them', async () => {
    const queue = uniqueName('callbacks-batch');
    const response = await enqueueWith(
      queue,
      { jobs: [{ callbackUrl: 'https://hooks.example.com/a' }, { failureCallbackUrl: 'http://[::1]/b' }] },
      true,
    );

    const problem = await problemOf(response);
    expect(problem.status).toBe(400);
    expect(problem.errors).toEqual([
      { path: 'jobs.1.failureCallbackUrl', message: expect.stringMatching(/not a public address/) },
    ]);
    expect(await jobCount(queue)).toBe(0);
  });

  it('refuses every callback where the host delivers none (no http job)', async () => {
    const queue = uniqueName('callbacks-none');
    const response = await fetchApp(
      createApp(appDeps()),
      new Request(`${BASE_URL}/v1/queues/${queue}/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ callbackUrl: 'https://hooks.example.com/done' }),
      }),
    );

    const problem = await problemOf(response);
    expect(problem.status).toBe(400);
    expect(problem.errors).toEqual([{ path: 'callbackUrl', message: expect.stringMatching(/delivers no callbacks/) }]);
    expect(await jobCount(queue)).toBe(0);
  });
});
