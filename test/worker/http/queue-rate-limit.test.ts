import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, client, enqueueJob, postJson, problemOf, request, success, uniqueName } from './support/api';

const api = client();

const claim = async (queue: string, tenant?: string) =>
  (
    await success(
      api.v1.queues[':queue'].claim.$post({
        param: { queue },
        json: { workerId: 'queue-rate-test', max: 10, ...(tenant === undefined ? {} : { tenant }) },
      }),
    )
  ).jobs;

describe('a queue rate limit over HTTP', () => {
  it('is set with PUT, shown by GET, and kept by claims over all tenants; the excess waits', async () => {
    const queue = uniqueName('rated-queue');
    const put = await success(
      api.v1.queues[':queue'].$put({ param: { queue }, json: { rateLimit: { count: 3, perSeconds: 60 } } }),
    );
    for (const tenant of ['a', 'b']) for (const payload of [1, 2]) await enqueueJob(queue, { tenant, payload });

    // A drain that another request woke may hold the queue's row for a moment, and a claim that
    // finds it held leaves the queue to the next claim: claim until one is served.
    let first: Awaited<ReturnType<typeof claim>> = [];
    await expect.poll(async () => (first = await claim(queue)).length).not.toBe(0);
    const second = await claim(queue);
    const got = await success(api.v1.queues[':queue'].$get({ param: { queue } }));
    const listed = (await success(api.v1.queues.$get())).queues.find((summary) => summary.queue === queue);

    expect(put).toMatchObject({ rateLimit: { count: 3, perSeconds: 60 }, startsInWindow: 0, custom: true });
    // Three of the four start, whatever their tenant; the fourth waits, queued, for the window.
    expect(first).toHaveLength(3);
    expect(new Set(first.map((job) => job.tenant))).toEqual(new Set(['a', 'b']));
    expect(second).toEqual([]);
    expect(got).toMatchObject({ rateLimit: { count: 3, perSeconds: 60 }, startsInWindow: 3 });
    expect(listed).toMatchObject({ rateLimit: { count: 3, perSeconds: 60 }, counts: { queued: 1, running: 3 } });
  });

  it('refuses a count under 1, a window under 1 s, and fractions, by name, changing nothing', async () => {
    const queue = uniqueName('rated-queue');
    await success(
      api.v1.queues[':queue'].$put({
        param: { queue },
        json: { concurrency: 2, rateLimit: { count: 10, perSeconds: 1 } },
      }),
    );
    for (const [rateLimit, path] of [
      [{ count: 0, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: -1, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: 10_001, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: 5, perSeconds: 0 }, 'rateLimit.perSeconds'],
      [{ count: 5, perSeconds: 0.5 }, 'rateLimit.perSeconds'],
      [{ count: 5 }, 'rateLimit.perSeconds'],
    ] as const) {
      const refused = await request(`/v1/queues/${queue}`, {
        method: 'PUT',
        apiKey: ADMIN_TOKEN,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ concurrency: 5, rateLimit }),
      });
      expect(await problemOf(refused)).toMatchObject({ status: 400, errors: [{ path }] });
    }
    expect(await success(api.v1.queues[':queue'].$get({ param: { queue } }))).toMatchObject({
      concurrency: 2,
      rateLimit: { count: 10, perSeconds: 1 },
    });
  });
});

describe('a queue rate limit that drops its excess, over HTTP', () => {
  it('answers the excess 201 cancelled, naming the queue, and shows onExcess; a bad one is refused by name', async () => {
    const queue = uniqueName('dropping-queue');
    const put = await success(
      api.v1.queues[':queue'].$put({
        param: { queue },
        json: { rateLimit: { count: 2, perSeconds: 3600, onExcess: 'drop' } },
      }),
    );
    expect(put).toMatchObject({ rateLimit: { count: 2, perSeconds: 3600, onExcess: 'drop' } });
    const answers = [];
    for (const tenant of ['a', 'b', 'c']) answers.push(await enqueueJob(queue, { tenant, payload: tenant }));
    expect(answers.map((job) => job.status)).toEqual(['queued', 'queued', 'cancelled']);
    expect(answers[2]!.lastError).toEqual({
      name: 'RateLimitedError',
      message: `its queue ${queue} was at its rate limit (2 starts in 3600 s)`,
    });
    const listed = (await success(api.v1.queues.$get())).queues.find((summary) => summary.queue === queue);
    expect(listed).toMatchObject({ rateLimit: { onExcess: 'drop' }, counts: { queued: 2, cancelled: 1 } });

    const refused = await request(`/v1/queues/${queue}`, {
      method: 'PUT',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rateLimit: { count: 5, perSeconds: 1, onExcess: 'wait' } }),
    });
    expect(await problemOf(refused)).toMatchObject({ status: 400, errors: [{ path: 'rateLimit.onExcess' }] });
    // Left out, it throttles.
    const throttling = await success(
      api.v1.queues[':queue'].$put({ param: { queue }, json: { rateLimit: { count: 2, perSeconds: 3600 } } }),
    );
    expect(throttling).toMatchObject({ rateLimit: { count: 2, perSeconds: 3600, onExcess: 'throttle' } });
    expect((await enqueueJob(queue, { payload: 'd' })).status).toBe('queued');
  });
});

describe('debounced jobs in GET /v1/stats and GET /v1/queues', () => {
  it('counts the jobs waiting out a debounce period, held ones too, and not the others', async () => {
    const queue = uniqueName('debounced');
    const tenant = uniqueName('debounce-tenant');
    const debounce = (key: string, extra: Record<string, unknown> = {}) =>
      postJson(`/v1/queues/${queue}/jobs`, {
        tenant,
        payload: key,
        debounceKey: key,
        debouncePeriodSeconds: 600,
        ...extra,
      });
    // Two keys, one enqueued twice (one job), one a concurrency key's second job (held and debounced).
    for (const key of ['a', 'a', 'b']) expect((await debounce(key)).status).toBeLessThan(300);
    await postJson(`/v1/queues/${queue}/jobs`, { tenant, payload: 'first', concurrencyKey: 'k' });
    expect((await debounce('c', { concurrencyKey: 'k' })).status).toBe(201);
    // Not debounced: a job scheduled by a delay, and a queued one.
    await enqueueJob(queue, { tenant, delaySeconds: 600 });
    await enqueueJob(queue, { tenant });

    const { stats } = await success(api.v1.stats.$get());
    const rows = stats.filter((row) => row.queue === queue);
    const listed = (await success(api.v1.queues.$get())).queues.find((summary) => summary.queue === queue);

    expect(rows.map(({ status, count, held, debounced }) => ({ status, count, held, debounced }))).toEqual([
      { status: 'queued', count: 2, held: 0, debounced: 0 },
      { status: 'scheduled', count: 4, held: 1, debounced: 3 },
    ]);
    expect(rows.find((row) => row.status === 'scheduled')?.heldBy).toMatchObject({ concurrency: 1 });
    expect(listed).toMatchObject({ debounced: 3, held: 1, counts: { scheduled: 4, queued: 2 } });
  });
});
