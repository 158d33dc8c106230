import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../../src/drain/define-job';
import { createApp } from '../../../src/http/app';
import { statusTokenSigner } from '../../../src/http/auth/status-token';
import { uiRoutes } from '../../../src/ui';
import { appDeps } from '../support/databases';
import {
  ADMIN_TOKEN,
  BASE_URL,
  claimOne,
  enqueueJob,
  postJson,
  problemOf,
  request,
  uniqueName,
  type EnqueuedJob,
} from './support/api';
import { fetchApp, fetchWithEnv } from './support/invoke';
import { serverSentEvents } from './support/sse';

/** Every field a status token may see (JobStatusView); nothing else. */
const STATUS_VIEW_FIELDS = [
  'attempts',
  'createdAt',
  'finishedAt',
  'id',
  'maxAttempts',
  'progress',
  'result',
  'runAt',
  'startedAt',
  'status',
  'waitingFor',
];

/** The first `event: job` of a job's stream, parsed. */
async function firstStreamedJob(response: Response): Promise<Record<string, unknown>> {
  const stream = serverSentEvents(response);
  try {
    for await (const event of stream)
      if (event.event === 'job') return JSON.parse(event.data) as Record<string, unknown>;
  } finally {
    await stream.return(undefined);
  }
  throw new Error('the stream ended without a job event');
}

const inOneHour = () => Math.floor(Date.now() / 1000) + 3600;

async function tokenFor(jobId: string, expiresAtSeconds = inOneHour(), secret = env.STATUS_TOKEN_SECRET!) {
  return (await statusTokenSigner(secret))(jobId, expiresAtSeconds);
}

describe('status tokens', () => {
  it("open the statusUrl's job without a key, and its events", async () => {
    const job = await enqueueJob(uniqueName('status'));
    const statusUrl = new URL(job.statusUrl!);

    const read = await request(statusUrl.pathname + statusUrl.search);
    const events = await request(`${statusUrl.pathname}/events${statusUrl.search}`);
    const stream = serverSentEvents(events);
    const first = (await stream.next()).value;
    await stream.return(undefined);

    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id: job.id, status: 'queued' });
    expect(events.status).toBe(200);
    expect(first).toMatchObject({ event: 'job' });
  });

  it('show only the status view: no payload, result, error, tenant, queue, worker or dedup key, on every route', async () => {
    const queue = uniqueName('status-view');
    const enqueued = await postJson(`/v1/queues/${queue}/jobs`, {
      tenant: uniqueName('tenant'),
      dedupKey: 'secret-dedup-key',
      maxAttempts: 3,
      payload: { url: 'https://hooks.example.test', headers: { authorization: 'Bearer payload-secret' } },
    });
    const job = await enqueued.json<EnqueuedJob>();
    const claimed = await claimOne(queue);
    await postJson(`/v1/jobs/${job.id}/extend`, {
      leaseToken: claimed.leaseToken,
      progress: { percent: 40, message: 'Resizing', cursor: 'private-cursor' },
    });
    await postJson(`/v1/jobs/${job.id}/fail`, {
      leaseToken: claimed.leaseToken,
      error: { message: 'secret error text' },
      retryInSeconds: 3600,
    });
    const statusUrl = new URL(job.statusUrl!);

    const read = await request(statusUrl.pathname + statusUrl.search);
    const waited = await request(`${statusUrl.pathname}${statusUrl.search}&wait=1`);
    const streamed = await firstStreamedJob(await request(`${statusUrl.pathname}/events${statusUrl.search}`));
    const page = await request(`/status/${job.id}${statusUrl.search}`);
    const asAdmin = await request(`/v1/jobs/${job.id}`, { apiKey: ADMIN_TOKEN });

    const view = await read.json<Record<string, unknown>>();
    expect(Object.keys(view).sort()).toEqual(STATUS_VIEW_FIELDS);
    expect(view).toMatchObject({
      id: job.id,
      status: 'retrying',
      attempts: 1,
      maxAttempts: 3,
      progress: { percent: 40, message: 'Resizing' },
      result: null,
    });
    expect(Object.keys(await waited.json<object>()).sort()).toEqual(STATUS_VIEW_FIELDS);
    expect(streamed).toEqual(view);
    const html = await page.text();
    for (const text of [JSON.stringify(view), html]) {
      for (const secret of [
        'payload-secret',
        'secret error text',
        'private-cursor',
        'secret-dedup-key',
        queue,
        'test-worker',
      ]) {
        expect(text).not.toContain(secret);
      }
    }
    // An API key still sees the whole job.
    expect(await asAdmin.json()).toMatchObject({ payload: job.payload, lastError: { message: 'secret error text' } });
  });

  it('show a result only as the job definition publishes it (publicResult), and its own progress (publicProgress)', async () => {
    const type = uniqueName('published');
    const definition = defineJob(
      type,
      z.object({}),
      () => ({ downloadUrl: 'https://files.example.test/1', internalId: 'x-secret' }),
      {
        publicResult: (result) => ({ downloadUrl: result.downloadUrl }),
        publicProgress: (progress) => ({ step: (progress as { step: string }).step }),
      },
    );
    const deps = appDeps({ jobType: (_env, name) => (name === type ? definition : undefined) });
    const app = createApp(deps);
    app.route('/', uiRoutes(deps));
    const job = await enqueueJob(type, { type });
    const claimed = await claimOne(type);
    await postJson(`/v1/jobs/${job.id}/extend`, {
      leaseToken: claimed.leaseToken,
      progress: { step: 'rendering', percent: 10 },
    });
    const statusUrl = new URL(job.statusUrl!);
    const running = await (
      await fetchApp(app, new Request(new URL(statusUrl.pathname + statusUrl.search, BASE_URL)))
    ).json();
    await postJson(`/v1/jobs/${job.id}/complete`, {
      leaseToken: claimed.leaseToken,
      result: { downloadUrl: 'https://files.example.test/1', internalId: 'x-secret' },
    });

    const done = await (
      await fetchApp(app, new Request(new URL(statusUrl.pathname + statusUrl.search, BASE_URL)))
    ).json();
    const withoutOptIn = await (await request(statusUrl.pathname + statusUrl.search)).json();

    expect(running).toMatchObject({ status: 'running', progress: { step: 'rendering' }, result: null });
    expect(done).toMatchObject({ status: 'succeeded', result: { downloadUrl: 'https://files.example.test/1' } });
    expect(JSON.stringify(done)).not.toContain('x-secret');
    // The reference Worker does not know this type: closed by default.
    expect(withoutOptIn).toMatchObject({ status: 'succeeded', result: null });
  });

  it('have their view described in the OpenAPI document, as the other answer of GET /v1/jobs/{id}', async () => {
    type Schema = { properties?: object; anyOf?: { $ref?: string }[] };
    const document = await (await request('/v1/openapi.json')).json<{
      components: { schemas: Record<string, Schema> };
      paths: Record<string, { get?: { responses: Record<string, { content: Record<string, { schema: Schema }> }> } }>;
    }>();
    const answer = document.paths['/v1/jobs/{id}']?.get?.responses['200']?.content['application/json']?.schema;

    expect(Object.keys(document.components.schemas.JobStatusView?.properties ?? {}).sort()).toEqual(STATUS_VIEW_FIELDS);
    expect(answer?.anyOf?.map((schema) => schema.$ref)).toEqual([
      '#/components/schemas/Job',
      '#/components/schemas/JobStatusView',
    ]);
    expect(Object.keys(document.components.schemas.EnqueuedJobReference?.properties ?? {})).toEqual([
      'id',
      'status',
      'statusUrl',
      'deduplicated',
      'debounced',
      'replaced',
    ]);
  });

  it('open nothing but their own job', async () => {
    const queue = uniqueName('status-scope');
    const job = await enqueueJob(queue);
    const other = await enqueueJob(queue);
    const token = await tokenFor(job.id);

    const otherJob = await request(`/v1/jobs/${other.id}?token=${token}`);
    const list = await request(`/v1/jobs?token=${token}`);
    const cancel = await request(`/v1/jobs/${job.id}/cancel?token=${token}`, { method: 'POST' });

    expect([otherJob.status, list.status, cancel.status]).toEqual([401, 401, 401]);
    expect((await problemOf(otherJob)).detail).toMatch(/status token/);
  });

  it('expire', async () => {
    const job = await enqueueJob(uniqueName('status-expired'));
    const expired = await tokenFor(job.id, Math.floor(Date.now() / 1000) - 1);

    expect((await request(`/v1/jobs/${job.id}?token=${expired}`)).status).toBe(401);
  });

  it('are refused when forged or signed with another secret', async () => {
    const job = await enqueueJob(uniqueName('status-forged'));
    const token = await tokenFor(job.id);
    const [version, expiry, signature] = token.split('.');
    const flipped = signature!.startsWith('A') ? `B${signature!.slice(1)}` : `A${signature!.slice(1)}`;
    const laterExpiry = `${version}.${Number(expiry) + 3600}.${signature}`;

    const otherSecret = await tokenFor(job.id, inOneHour(), 'another-secret');
    for (const forged of [`${version}.${expiry}.${flipped}`, laterExpiry, otherSecret, 'v1.1.x', '']) {
      expect((await request(`/v1/jobs/${job.id}?token=${encodeURIComponent(forged)}`)).status).toBe(401);
    }
  });

  it('lose to an Authorization header, which must then be valid', async () => {
    const job = await enqueueJob(uniqueName('status-and-key'));
    const token = await tokenFor(job.id);

    expect((await request(`/v1/jobs/${job.id}?token=${token}`, { apiKey: 'wrong' })).status).toBe(401);
    expect((await request(`/v1/jobs/${job.id}?token=${token}`, { apiKey: ADMIN_TOKEN })).status).toBe(200);
  });

  it('under npm start are signed with a secret derived from ADMIN_TOKEN; outside dev the Worker refuses to start without one', async () => {
    const queue = uniqueName('status-dev');
    const enqueue = (overrides: Record<string, string | undefined>) =>
      fetchWithEnv(overrides, `${BASE_URL}/v1/queues/${queue}/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: '{}',
      }).then((response) => response.json<EnqueuedJob>());

    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const dev = await enqueue({ STATUS_TOKEN_SECRET: undefined, SKIPLOCK_DEV: '1' });
    const unconfigured = await fetchWithEnv(
      { STATUS_TOKEN_SECRET: undefined, SKIPLOCK_DEV: undefined },
      `${BASE_URL}/healthz`,
    );
    const devRead = await fetchWithEnv({ STATUS_TOKEN_SECRET: undefined, SKIPLOCK_DEV: '1' }, dev.statusUrl!);

    expect(devRead.status).toBe(200);
    expect((await request(new URL(dev.statusUrl!).pathname + new URL(dev.statusUrl!).search)).status).toBe(401);
    expect(unconfigured.status).toBe(503);
    expect(await unconfigured.json()).toMatchObject({ type: expect.stringMatching(/misconfigured$/) });
    expect(log).toHaveBeenCalledWith(
      expect.stringMatching(/^skiplock: STATUS_TOKEN_SECRET is not set: .*wrangler secret put STATUS_TOKEN_SECRET/),
    );
    log.mockRestore();
  });
});

describe('CORS', () => {
  const preflight = (origin: string) =>
    request('/v1/jobs/00000000-0000-4000-8000-000000000000', {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });

  it('answers a preflight from a configured origin', async () => {
    const response = await preflight('https://app.example.test');

    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('https://app.example.test');
    expect(response.headers.get('access-control-allow-methods')).toContain('GET');
    expect(response.headers.get('access-control-allow-headers')).toContain('Authorization');
    expect(response.headers.get('x-request-id')).toBeTruthy();
  });

  it('gives no CORS headers to another origin, so its browser refuses', async () => {
    const response = await preflight('https://evil.example.test');
    const read = await request('/healthz', { headers: { origin: 'https://evil.example.test' } });

    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(read.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('lets a configured origin read a job and its ETag with the status token', async () => {
    const job = await enqueueJob(uniqueName('cors'));
    const statusUrl = new URL(job.statusUrl!);

    const headers = { origin: 'https://admin.example.test' };
    const response = await request(statusUrl.pathname + statusUrl.search, { headers });

    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe('https://admin.example.test');
    expect(response.headers.get('access-control-expose-headers')).toContain('ETag');
  });
});
