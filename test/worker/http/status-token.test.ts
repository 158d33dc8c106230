import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { statusTokenSigner } from '../../../src/http/auth/status-token';
import { ADMIN_TOKEN, BASE_URL, enqueueJob, problemOf, request, uniqueName, type EnqueuedJob } from './support/api';
import { fetchWithEnv } from './support/invoke';
import { serverSentEvents } from './support/sse';

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
    const unconfigured = await fetchWithEnv({ STATUS_TOKEN_SECRET: undefined, SKIPLOCK_DEV: undefined }, `${BASE_URL}/healthz`);
    const devRead = await fetchWithEnv({ STATUS_TOKEN_SECRET: undefined, SKIPLOCK_DEV: '1' }, dev.statusUrl!);

    expect(devRead.status).toBe(200);
    expect((await request(new URL(dev.statusUrl!).pathname + new URL(dev.statusUrl!).search)).status).toBe(401);
    expect(unconfigured.status).toBe(503);
    expect(await unconfigured.json()).toMatchObject({ type: expect.stringMatching(/misconfigured$/) });
    expect(log).toHaveBeenCalledWith(expect.stringMatching(/^skiplock: STATUS_TOKEN_SECRET is not set: .*wrangler secret put STATUS_TOKEN_SECRET/));
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
