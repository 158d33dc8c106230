import { describe, expect, it } from 'vitest';
import { call, createKey, expectJson, stack, uniqueName } from './support/api';

type Enqueued = {
  id: string;
  status: string;
  statusUrl: string;
  deduplicated: boolean;
  tenant?: string;
  payload?: unknown;
};

const admin = stack.adminToken;

/**
 * Finding 2: dedup keys were shared across tenants (one tenant's key made
 * another's enqueue answer 409), and a dedup hit gave a key without `read`
 * the whole job of another tenant with a fresh statusUrl.
 */
describe('dedup keys', () => {
  it("are per tenant: a tenant-bound key's job with another tenant's key is made, and never sees theirs", async () => {
    const queue = uniqueName('sec-dedup');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    const boundKey = await createKey(['enqueue', 'read'], mine);
    const theirsJob = await expectJson<Enqueued>(
      await call(`/v1/queues/${queue}/jobs`, {
        key: admin,
        body: { tenant: theirs, dedupKey: 'order-1', payload: { card: 'theirs' } },
      }),
      201,
    );

    const own = await call(`/v1/queues/${queue}/jobs`, {
      key: boundKey,
      body: { dedupKey: 'order-1', payload: 'mine' },
    });
    const idempotentTheirs = await call(`/v1/queues/${queue}/jobs`, {
      key: admin,
      body: { tenant: theirs },
      headers: { 'idempotency-key': 'same' },
    });
    const idempotentMine = await call(`/v1/queues/${queue}/jobs`, {
      key: boundKey,
      body: {},
      headers: { 'idempotency-key': 'same' },
    });

    const ownJob = await expectJson<Enqueued>(own, 201);
    expect(ownJob).toMatchObject({ tenant: mine, payload: 'mine', deduplicated: false });
    expect(ownJob.id).not.toBe(theirsJob.id);
    expect(idempotentTheirs.status).toBe(201);
    expect(idempotentMine.status).toBe(201);
  });

  it("answer a dedup or Idempotency-Key hit to a key without read with the job's id and status only", async () => {
    const queue = uniqueName('sec-dedup-no-read');
    const tenant = uniqueName('victim');
    const enqueueOnly = await createKey(['enqueue']);
    const original = await expectJson<Enqueued>(
      await call(`/v1/queues/${queue}/jobs`, {
        key: admin,
        body: { tenant, dedupKey: 'order-1', payload: { card: '4242' } },
      }),
      201,
    );
    await expectJson(
      await call(`/v1/queues/${queue}/jobs`, {
        key: enqueueOnly,
        body: { tenant },
        headers: { 'idempotency-key': 'k' },
      }),
      201,
    );

    const hit = await expectJson(
      await call(`/v1/queues/${queue}/jobs`, { key: enqueueOnly, body: { tenant, dedupKey: 'order-1' } }),
      200,
    );
    const retried = await expectJson(
      await call(`/v1/queues/${queue}/jobs`, {
        key: enqueueOnly,
        body: { tenant },
        headers: { 'idempotency-key': 'k' },
      }),
      200,
    );

    expect(hit).toEqual({
      id: original.id,
      status: 'queued',
      statusUrl: expect.any(String),
      deduplicated: true,
      debounced: false,
      replaced: false,
    });
    expect(Object.keys(retried).sort()).toEqual(['debounced', 'deduplicated', 'id', 'replaced', 'status', 'statusUrl']);
    // The statusUrl opens the status view only (below).
    const view = await expectJson(await fetch(String(hit.statusUrl)), 200);
    expect(JSON.stringify(view)).not.toContain('4242');
  });
});

/** The fields a status token may see (JobStatusView). */
const STATUS_VIEW = [
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

/**
 * Finding 3: a status token opened the whole job (payload, result,
 * lastError, progress, tenant, workerId, dedupKey) on GET and its event stream.
 */
describe('a status token', () => {
  it('opens the status view only, on GET, ?wait, the event stream and the status page', async () => {
    const queue = uniqueName('sec-status');
    const secrets = {
      payload: 'payload-secret',
      tenant: uniqueName('secret-tenant'),
      dedupKey: 'secret-dedup',
      error: 'secret-error',
      cursor: 'secret-cursor',
      result: 'secret-result',
      worker: 'secret-worker',
    };
    const job = await expectJson<Enqueued>(
      await call(`/v1/queues/${queue}/jobs`, {
        key: admin,
        body: { tenant: secrets.tenant, dedupKey: secrets.dedupKey, payload: { authorization: secrets.payload } },
      }),
      201,
    );
    const { jobs } = await expectJson<{ jobs: { leaseToken: string }[] }>(
      await call(`/v1/queues/${queue}/claim`, { key: admin, body: { workerId: secrets.worker } }),
      200,
    );
    const leaseToken = jobs[0]!.leaseToken;
    await expectJson(
      await call(`/v1/jobs/${job.id}/extend`, {
        key: admin,
        body: { leaseToken, progress: { percent: 50, cursor: secrets.cursor } },
      }),
      200,
    );
    await expectJson(
      await call(`/v1/jobs/${job.id}/complete`, {
        key: admin,
        body: { leaseToken, result: { value: secrets.result } },
      }),
      200,
    );
    const statusUrl = new URL(job.statusUrl);
    const token = statusUrl.searchParams.get('token')!;

    const read = await expectJson(await fetch(statusUrl), 200);
    const waited = await expectJson(await fetch(`${statusUrl.href}&wait=1`), 200);
    const stream = await (await fetch(`${stack.url}/v1/jobs/${job.id}/events?token=${token}`)).text();
    const page = await (await fetch(`${stack.url}/status/${job.id}?token=${token}`)).text();

    expect(Object.keys(read).sort()).toEqual(STATUS_VIEW);
    expect(read).toMatchObject({
      id: job.id,
      status: 'succeeded',
      progress: { percent: 50, message: null },
      result: null,
    });
    expect(Object.keys(waited).sort()).toEqual(STATUS_VIEW);
    expect(stream).toContain('event: end');
    for (const text of [JSON.stringify(read), stream, page]) {
      for (const secret of [...Object.values(secrets), queue]) expect(text).not.toContain(secret);
    }
  });
});
