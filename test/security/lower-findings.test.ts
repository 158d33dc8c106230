import { describe, expect, it, vi } from 'vitest';
import { createSkiplock } from '../../src/worker/index';
import { call, createKey, expectJson, stack, uniqueName, type Call } from './support/api';

type Problem = { status: number; detail: string; errors?: { path: string }[]; requestId: string };
const admin = stack.adminToken;

async function enqueue(queue: string, body: Record<string, unknown> = {}): Promise<{ id: string; statusUrl: string }> {
  return expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body }), 201);
}

describe('5: /v1/stats health', () => {
  it("gives a tenant-bound key its own tenant's signs and none of the database's figures", async () => {
    const tenantKey = await createKey(['read'], uniqueName('stats-tenant'));

    const asTenant = await expectJson<{ health: object }>(await call('/v1/stats', { key: tenantKey }), 200);
    const asAdmin = await expectJson<{ health: object }>(await call('/v1/stats', { key: admin }), 200);

    expect(Object.keys(asTenant.health).sort()).toEqual(['expiredLeasesReaped', 'oldestWaitingSeconds']);
    expect(Object.keys(asAdmin.health)).toEqual(expect.arrayContaining(['deadTuples', 'oldestSnapshotPid']));
  });
});

describe('GET /metrics (#41)', () => {
  it("needs the operator scope, and shows a tenant-bound operator key its own tenant's series only", async () => {
    const [mine, theirs] = [uniqueName('metrics-mine'), uniqueName('metrics-theirs')];
    const queue = uniqueName('sec-metrics');
    await enqueue(queue, { tenant: mine });
    await enqueue(queue, { tenant: theirs });

    const read = await call('/metrics', { key: await createKey(['read']) });
    const bound = await call('/metrics', { key: await createKey(['operator'], mine) });
    const text = await bound.text();

    expect(read.status).toBe(403);
    expect(read.headers.get('content-type')).toBe('application/problem+json');
    expect((await call('/metrics')).status).toBe(401);
    expect(bound.status).toBe(200);
    expect(new Set([...text.matchAll(/tenant="([^"]*)"/g)].map((match) => match[1]))).toEqual(new Set([mine]));
    expect(text).toContain(`skiplock_jobs_waiting{queue="${queue}",tenant="${mine}"} 1`);
    expect(text).toContain(`skiplock_attempts_started_total{queue="${queue}",tenant="${mine}"} 0`);
    // The deployment's series (queues' delivery targets, the statistics' rollup) are no tenant's.
    expect(text).not.toContain('skiplock_queue_delivery_info');
    expect(text).not.toContain('skiplock_stats_rolled_through_timestamp_seconds');
  });
});

describe('6: error details', () => {
  it('answers a cursor past what a bigint holds with 400 naming the field, and no database text', async () => {
    const response = await call(`/v1/jobs?cursor=${btoa('seq:9999999999999999999')}`, { key: admin });
    const problem = await expectJson<Problem>(response, 400);

    expect(problem.errors?.map((error) => error.path)).toEqual(['cursor']);
    expect(JSON.stringify(problem)).not.toMatch(/bigint|out of range/);
  });

  it('answers /healthz without a key with up or down only', async () => {
    expect(await expectJson(await call('/healthz'), 200)).toEqual({ status: 'ok' });
    expect(await expectJson(await call('/healthz', { key: admin }), 200)).toMatchObject({ database: { ok: true } });
  });
});

describe('7: list pages', () => {
  it('end once they hold a megabyte of jobs, with a nextCursor for the rest', async () => {
    const queue = uniqueName('sec-list-bytes');
    for (let i = 0; i < 6; i++) await enqueue(queue, { payload: `${i}`.repeat(250_000) });

    const first = await call(`/v1/jobs?queue=${queue}&limit=500`, { key: admin });
    const text = await first.text();
    const page = JSON.parse(text) as { jobs: unknown[]; nextCursor: string | null };
    const rest = await expectJson<{ jobs: unknown[]; nextCursor: string | null }>(
      await call(`/v1/jobs?queue=${queue}&limit=500&cursor=${page.nextCursor}`, { key: admin }),
      200,
    );

    expect(page.jobs).toHaveLength(5);
    expect(text.length).toBeLessThan(1024 * 1024 + 260_000);
    expect(rest).toMatchObject({ jobs: [expect.anything()], nextCursor: null });
  });
});

describe('8: runAt and expiresAt', () => {
  it.each([
    [{ runAt: '0001-01-01T00:00:00Z' }, 'runAt'],
    [{ runAt: '2100-01-01T00:00:00Z' }, 'runAt'],
    [{ expiresAt: '1970-01-01T00:00:00Z' }, 'expiresAt'],
  ])('refuses %j naming the field', async (body, field) => {
    const problem = await expectJson<Problem>(
      await call(`/v1/queues/${uniqueName('sec-time')}/jobs`, { key: admin, body }),
      400,
    );
    expect(problem.errors).toEqual([{ path: field, message: 'must be from 2000-01-01 to 10 years from now' }]);
  });
});

describe('9: secrets, failed authentications, watchers', () => {
  it('refuses an ADMIN_TOKEN or STATUS_TOKEN_SECRET under 32 characters outside dev, in one line', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const env = {
      // A Neon-shaped URL: a local one is refused first, for a reason of its own.
      DATABASE_URL: 'postgres://nobody@ep-none-000000.eu-central-1.aws.neon.tech/none',
      ADMIN_TOKEN: 'short',
      STATUS_TOKEN_SECRET: 'x'.repeat(32),
    };
    const ctx = { waitUntil: () => {}, passThroughOnException: () => {}, props: {} };

    const response = await createSkiplock().fetch(new Request('http://skiplock.test/healthz'), env, ctx);

    expect(response.status).toBe(503);
    expect(log.mock.calls.map((line) => String(line[0]))).toEqual([
      'skiplock: ADMIN_TOKEN is 5 characters: outside dev it must be at least 32 (a random one: `openssl rand -base64 32`)',
    ]);
    log.mockRestore();
  });

  it('turns a client away after 10 failed authentications in a minute, and no other client', async () => {
    // wrangler dev passes the client's CF-Connecting-IP through; on Cloudflare the edge sets it.
    const from = (address: string, init: Call = {}) => ({ ...init, headers: { 'cf-connecting-ip': address } });
    const address = `192.0.2.${Math.floor(Math.random() * 250) + 1}`;
    const job = await enqueue(uniqueName('sec-auth'));
    for (let i = 0; i < 9; i++)
      expect((await call('/v1/jobs', from(address, { key: `skiplock_${'A'.repeat(43)}` }))).status).toBe(401);
    expect((await call(`/status/${job.id}?token=forged`, from(address))).status).toBe(401);

    const turnedAway = await call('/v1/jobs', from(address, { key: admin }));
    const otherClient = await call('/v1/jobs', from('198.51.100.1', { key: admin }));

    expect(turnedAway.status).toBe(429);
    expect(Number(turnedAway.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(otherClient.status).toBe(200);
  });

  it('lets 10 requests wait on one job and keeps 10 event streams of it open, and answers 429 beyond', async () => {
    const { id } = await enqueue(uniqueName('sec-watchers'));
    const etag = (await call(`/v1/jobs/${id}`, { key: admin })).headers.get('etag')!;
    // Eleven waits at once: whichever arrives last finds the ten slots taken by the others, which wait.
    const waits = Array.from({ length: 11 }, () =>
      call(`/v1/jobs/${id}?wait=20`, { key: admin, headers: { 'if-none-match': etag } }),
    );
    // A stream answers once it holds its slot.
    const streams = await Promise.all(Array.from({ length: 10 }, () => call(`/v1/jobs/${id}/events`, { key: admin })));
    const eleventhStream = await call(`/v1/jobs/${id}/events`, { key: admin });

    expect(eleventhStream.status).toBe(429);
    expect(streams.map((response) => response.status)).toEqual(Array(10).fill(200));
    // Ending the job ends the streams and the waits, which frees their slots.
    await call(`/v1/jobs/${id}/cancel`, { key: admin, method: 'POST' });
    expect((await Promise.all(waits)).map((response) => response.status).sort()).toEqual([...Array(10).fill(200), 429]);
    await Promise.all(streams.map((response) => response.text()));
    expect((await call(`/v1/jobs/${id}?wait=1`, { key: admin })).status).toBe(200);
  });
});
