import { describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  claimOne,
  client,
  createKey,
  enqueueJob,
  expectStatus,
  postJson,
  problemOf,
  request,
  success,
  uniqueName,
} from './support/api';

const api = client();

describe('POST /v1/queues/{queue}/claim', () => {
  it('claims up to max ready jobs, each with a lease token', async () => {
    const queue = uniqueName('claim');
    for (let i = 0; i < 3; i++) await enqueueJob(queue);

    const json = { max: 2, workerId: 'w1', leaseSeconds: 120 };
    const response = await api.v1.queues[':queue'].claim.$post({ param: { queue }, json });

    expectStatus(response, 200);
    const { jobs } = await response.json();
    expect(jobs).toHaveLength(2);
    for (const job of jobs) {
      expect(job).toMatchObject({ status: 'running', attempts: 1, workerId: 'w1', leaseToken: expect.any(String) });
      expect(Date.parse(job.leaseExpiresAt!) - Date.parse(job.startedAt!)).toBeCloseTo(120_000, -3);
    }
  });

  it('claims only the types the worker names, and answers an empty list when none is ready', async () => {
    const queue = uniqueName('claim-types');
    const image = await enqueueJob(queue, { type: 'resize-image' });
    await enqueueJob(queue, { type: 'send-email' });

    const claim = () =>
      success(
        api.v1.queues[':queue'].claim.$post({
          param: { queue },
          json: { max: 10, workerId: 'w', types: ['resize-image'] },
        }),
      );
    const claimed = await claim();
    const none = await claim();

    expect(claimed.jobs.map((job) => job.id)).toEqual([image.id]);
    expect(none.jobs).toEqual([]);
  });

  it('finds the ready job of its queue whatever other tenants have waiting', async () => {
    const queue = uniqueName('claim-among-tenants');
    // Tenants with jobs elsewhere, and tenants with jobs here that are not ready: none has a job to give.
    const busy = Array.from({ length: 10 }, () => ({ tenant: uniqueName('busy') }));
    const later = Array.from({ length: 10 }, () => ({ tenant: uniqueName('later'), delaySeconds: 3600 }));
    await success(
      api.v1.queues[':queue'].jobs.batch.$post({
        param: { queue: uniqueName('elsewhere') },
        json: { jobs: busy },
        header: {},
      }),
    );
    await success(api.v1.queues[':queue'].jobs.batch.$post({ param: { queue }, json: { jobs: later }, header: {} }));
    const ready = await enqueueJob(queue, { tenant: uniqueName('ready') });

    expect((await claimOne(queue)).id).toBe(ready.id);
  });

  it.each([
    [{ workerId: 'w', max: 0 }, 'max'],
    [{ workerId: 'w', max: 101 }, 'max'],
    [{}, 'workerId'],
    [{ workerId: 'w', leaseSeconds: 0 }, 'leaseSeconds'],
    [{ workerId: 'w', types: [''] }, 'types.0'],
  ])('answers 400 for %j', async (body, path) => {
    const response = await postJson(`/v1/queues/${uniqueName('claim-invalid')}/claim`, body);

    expect((await problemOf(response)).errors?.[0]?.path).toBe(path);
  });
});

/** A job enqueued and claimed at once, in a queue of its own unless one is given. */
async function claimedJob(queue = uniqueName('pull')) {
  await enqueueJob(queue);
  return claimOne(queue);
}

describe('complete, fail, extend, release', () => {
  it('completes a claimed job with its result, once', async () => {
    const { id, leaseToken } = await claimedJob();

    const completed = await api.v1.jobs[':id'].complete.$post({
      param: { id },
      json: { leaseToken, result: { sent: 3 } },
    });
    const again = await api.v1.jobs[':id'].complete.$post({ param: { id }, json: { leaseToken } });

    expect(completed.status).toBe(200);
    expect(await completed.json()).toMatchObject({ id, status: 'succeeded', result: { sent: 3 } });
    expect(await problemOf(again)).toMatchObject({ status: 409, type: 'https://skiplock.dev/problems/stale-lease' });
  });

  it('answers 409 for a token that never held the job, and 400 for one that is no uuid', async () => {
    const { id } = await claimedJob();

    const stale = await postJson(`/v1/jobs/${id}/complete`, { leaseToken: crypto.randomUUID() });
    const malformed = await postJson(`/v1/jobs/${id}/complete`, { leaseToken: 'abc' });

    expect((await problemOf(stale)).status).toBe(409);
    expect((await problemOf(malformed)).errors?.[0]?.path).toBe('leaseToken');
  });

  it('fails an attempt into a retry after the given delay, or for good', async () => {
    const [first, second] = [await claimedJob(), await claimedJob()];

    const retrying = await api.v1.jobs[':id'].fail.$post({
      param: { id: first.id },
      json: { leaseToken: first.leaseToken, error: { message: 'timeout' }, retryInSeconds: 60 },
    });
    const failed = await api.v1.jobs[':id'].fail.$post({
      param: { id: second.id },
      json: { leaseToken: second.leaseToken, error: 'bad payload', forGood: true },
    });
    const both = await postJson(`/v1/jobs/${second.id}/fail`, {
      leaseToken: second.leaseToken,
      forGood: true,
      retryInSeconds: 1,
    });

    expectStatus(retrying, 200);
    const retryingJob = await retrying.json();
    expect(retryingJob).toMatchObject({ status: 'retrying', lastError: { message: 'timeout' } });
    expect(Date.parse(retryingJob.runAt) - Date.now()).toBeGreaterThan(50_000);
    expect(await failed.json()).toMatchObject({ status: 'failed', lastError: 'bad payload' });
    expect((await problemOf(both)).errors?.[0]?.path).toBe('retryInSeconds');
  });

  it('extends a lease with progress, and tells the worker when the job was cancelled', async () => {
    const { id, leaseToken, leaseExpiresAt } = await claimedJob();

    const heartbeat = { leaseToken, leaseSeconds: 600, progress: { done: 40 } };
    const extended = await api.v1.jobs[':id'].extend.$post({ param: { id }, json: heartbeat });
    await api.v1.jobs[':id'].cancel.$post({ param: { id } });
    const afterCancel = await api.v1.jobs[':id'].extend.$post({ param: { id }, json: { leaseToken } });
    const job = await success(api.v1.jobs[':id'].$get({ param: { id }, query: {} }));

    expectStatus(extended, 200);
    const lease = await extended.json();
    expect(Date.parse(lease.leaseExpiresAt)).toBeGreaterThan(Date.parse(leaseExpiresAt!));
    expect(lease.cancelRequested).toBe(false);
    expect(await afterCancel.json()).toMatchObject({ cancelRequested: true });
    expect(job).toMatchObject({ progress: { done: 40 } });
  });

  it('releases a job back to the queue, delayed when asked, and refuses a stale release', async () => {
    const [first, second] = [await claimedJob(), await claimedJob()];

    const release = (job: { id: string; leaseToken: string }, delaySeconds?: number) =>
      api.v1.jobs[':id'].release.$post({ param: { id: job.id }, json: { leaseToken: job.leaseToken, delaySeconds } });
    const released = await release(first);
    const delayed = await release(second, 300);
    const stale = await release(first);

    expect(await released.json()).toMatchObject({ status: 'queued', attempts: 0 });
    expect(await delayed.json()).toMatchObject({ status: 'scheduled' });
    expect(stale.status).toBe(409);
  });
});

describe('POST /v1/workers/{workerId}/release', () => {
  it("hands back, to the worker's own key, every job the worker holds at once, and an empty list when it holds none", async () => {
    const queue = uniqueName('release-worker');
    for (let i = 0; i < 3; i++) await enqueueJob(queue);
    const workerId = uniqueName('crashed-worker');
    const own = client(await createKey(['worker'], undefined, workerId));
    await success(own.v1.queues[':queue'].claim.$post({ param: { queue }, json: { max: 2, workerId } }));

    const released = await success(own.v1.workers[':workerId'].release.$post({ param: { workerId } }));
    const again = await success(own.v1.workers[':workerId'].release.$post({ param: { workerId } }));

    expect(released.jobs.map((job) => [job.status, job.attempts])).toEqual([
      ['queued', 1],
      ['queued', 1],
    ]);
    expect(again.jobs).toEqual([]);
    const claimed = await success(
      api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { max: 3, workerId: 'next' } }),
    );
    expect(claimed.jobs).toHaveLength(3);
  });

  it('refuses a worker id with control characters (400)', async () => {
    const problem = await problemOf(await postJson('/v1/workers/a%07b/release', {}));
    expect(problem).toMatchObject({ status: 400 });
  });

  it('refuses every key but the one bound to that worker id, admin included, and changes nothing: the worker may still run its jobs', async () => {
    const queue = uniqueName('release-live');
    await enqueueJob(queue);
    const workerId = uniqueName('live-worker');
    const own = await createKey(['worker'], undefined, workerId);
    const [claimed] = (
      await success(client(own).v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId } }))
    ).jobs;
    const others = [
      ADMIN_TOKEN,
      await createKey(['worker']),
      await createKey(['worker'], 'default'),
      await createKey(['worker'], undefined, uniqueName('another-worker')),
    ];

    const statuses = [];
    for (const key of others) {
      const response = await request(`/v1/workers/${workerId}/release`, { method: 'POST', apiKey: key });
      statuses.push((await problemOf(response)).status);
    }

    expect(statuses).toEqual([403, 403, 403, 403]);
    expect(await success(api.v1.jobs[':id'].$get({ param: { id: claimed!.id }, query: {} }))).toMatchObject({
      status: 'running',
      workerId,
    });
  });

  it("never reaches a drain's jobs: a worker id of skiplock's own drains is refused for claims, keys and releases (400)", async () => {
    const drainId = 'skiplock:cron-1a2b3c4d';
    const claim = await postJson(`/v1/queues/${uniqueName('q')}/claim`, { workerId: drainId });
    const key = await postJson('/v1/keys', { name: 'k', scopes: ['worker'], workerId: drainId });
    const release = await postJson(`/v1/workers/${encodeURIComponent(drainId)}/release`, {});

    for (const [response, field] of [
      [claim, 'workerId'],
      [key, 'workerId'],
      [release, 'workerId'],
    ] as const) {
      expect(await problemOf(response)).toMatchObject({ status: 400, errors: [{ path: field }] });
    }
  });

  it('lets a bound key claim under its own worker id only (403 naming workerId)', async () => {
    const workerId = uniqueName('bound-claimer');
    const bound = await createKey(['worker'], undefined, workerId);

    const refused = await request(`/v1/queues/${uniqueName('q')}/claim`, {
      method: 'POST',
      apiKey: bound,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ workerId: 'someone-else' }),
    });

    expect(await problemOf(refused)).toMatchObject({
      status: 403,
      errors: [{ path: 'workerId', message: `must be ${workerId} with this key` }],
    });
  });
});

describe('POST /v1/jobs/acknowledge', () => {
  async function claimSome(queue: string, count: number, tenant?: string) {
    for (let i = 0; i < count; i++)
      await enqueueJob(queue, { payload: i, ...(tenant === undefined ? {} : { tenant }) });
    const { jobs } = await success(
      api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { max: count, workerId: 'batch-worker' } }),
    );
    expect(jobs).toHaveLength(count);
    return jobs.sort((a, b) => Number(a.payload) - Number(b.payload));
  }
  const statusOf = async (id: string) => (await success(api.v1.jobs[':id'].$get({ param: { id }, query: {} }))).status;

  it('completes, fails and hands back many jobs in one request; a stale token is reported and changes nothing', async () => {
    const [a, b, c, d, e] = await claimSome(uniqueName('ack'), 5);
    const staleToken = crypto.randomUUID();

    const response = await postJson('/v1/jobs/acknowledge', {
      complete: [
        { id: a!.id, leaseToken: a!.leaseToken, result: { rows: 1 } },
        { id: e!.id, leaseToken: staleToken },
      ],
      fail: [
        { id: b!.id, leaseToken: b!.leaseToken, error: { message: 'bad row' }, forGood: true },
        { id: c!.id, leaseToken: c!.leaseToken, error: { message: 'later' }, retryInSeconds: 600 },
      ],
      release: [{ id: d!.id, leaseToken: d!.leaseToken, delaySeconds: 600 }],
    });

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      completed: [a!.id],
      failed: expect.arrayContaining([
        { id: b!.id, outcome: 'failed' },
        { id: c!.id, outcome: 'retrying' },
      ]),
      released: [d!.id],
      stale: [e!.id],
    });
    expect(await Promise.all([a, b, c, d, e].map((job) => statusOf(job!.id)))).toEqual([
      'succeeded',
      'failed',
      'retrying',
      'scheduled',
      'running',
    ]);
  });

  it("keeps a tenant-bound key to its tenant's jobs: another tenant's are reported stale and left running", async () => {
    const queue = uniqueName('ack-tenants');
    const [own] = await claimSome(queue, 1, 'ack-own');
    const [other] = await claimSome(queue, 1, 'ack-other');
    const key = await createKey(['worker', 'read'], 'ack-own');

    const response = await postJson(
      '/v1/jobs/acknowledge',
      { complete: [own, other].map((job) => ({ id: job!.id, leaseToken: job!.leaseToken })) },
      key,
    );

    expect(await response.json()).toEqual({ completed: [own!.id], failed: [], released: [], stale: [other!.id] });
    expect(await statusOf(other!.id)).toBe('running');
  });

  it('refuses an empty acknowledgement, a job named twice and a failure for good with a retry delay (400), changing nothing', async () => {
    const [job] = await claimSome(uniqueName('ack-bad'), 1);
    const lease = { id: job!.id, leaseToken: job!.leaseToken };
    const refusals: Array<[unknown, string]> = [
      [{}, 'complete'],
      [{ complete: [lease], release: [lease] }, 'release.0.id'],
      [{ fail: [{ ...lease, forGood: true, retryInSeconds: 5 }] }, 'fail.0.retryInSeconds'],
      [{ complete: [{ id: 'not-a-uuid', leaseToken: job!.leaseToken }] }, 'complete.0.id'],
    ];
    for (const [body, field] of refusals) {
      const response = await postJson('/v1/jobs/acknowledge', body);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      const problem = await problemOf(response);
      expect(problem, JSON.stringify(body)).toMatchObject({ status: 400 });
      expect(JSON.stringify(problem)).toContain(field);
    }
    expect(await statusOf(job!.id)).toBe('running');
  });
});
