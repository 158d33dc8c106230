import { describe, expect, it } from 'vitest';
import { client, postJson, problemOf, success, uniqueName } from './support/api';

const api = client();

async function enqueueRated(queue: string, json: Record<string, unknown>) {
  const response = await postJson(`/v1/queues/${queue}/jobs`, json);
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as { id: string; status: string; lastError: unknown };
}

async function claim(queue: string) {
  const { jobs } = await success(
    api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'rate-test', max: 10 } }),
  );
  return jobs;
}

describe('rate keys over HTTP', () => {
  it('starts at most the limit in the window; the excess is held, says why, and its key is listed', async () => {
    const queue = uniqueName('rated');
    const tenant = uniqueName('rated-tenant');
    const key = uniqueName('store');
    const rate = { rateKey: key, rateLimit: 2, ratePeriodSeconds: 60 };
    for (const payload of [1, 2]) await enqueueRated(queue, { tenant, payload, ...rate });
    const held = await enqueueRated(queue, { tenant, payload: 3, ...rate });

    expect((await claim(queue)).map((job) => job.payload)).toEqual([1, 2]);
    expect(await claim(queue)).toEqual([]);
    const history = await success(api.v1.jobs[':id'].history.$get({ param: { id: held.id } }));
    expect(history.events.map((event) => event.kind)).toEqual(['enqueued', 'held']);
    expect(history.events[1]!.detail).toMatchObject({ reason: 'its key is at its rate limit (2 starts in 60 s)' });
    const { stats } = await success(api.v1.stats.$get());
    expect(stats.find((row) => row.queue === queue && row.status === 'queued')?.heldBy).toEqual({
      concurrency: 0,
      order: 0,
      failedHead: 0,
      rate: 1,
    });
    const page = await success(api.v1['concurrency-keys'].$get({ query: { tenant } }));
    expect(page.keys).toEqual([
      expect.objectContaining({
        key,
        slots: null,
        held: 1,
        rate: expect.objectContaining({ limit: 2, periodSeconds: 60, onExcess: 'throttle', startsInWindow: 2 }),
      }),
    ]);
  });

  it('drops the excess at enqueue when asked: the answer is the cancelled job, saying why', async () => {
    const queue = uniqueName('dropped');
    const rate = { rateKey: uniqueName('store'), rateLimit: 1, ratePeriodSeconds: 60, rateOnExcess: 'drop' };
    expect((await enqueueRated(queue, { payload: 1, ...rate })).status).toBe('queued');
    const dropped = await enqueueRated(queue, { payload: 2, ...rate });
    expect(dropped.status).toBe('cancelled');
    expect(dropped.lastError).toMatchObject({ name: 'RateLimitedError' });
  });

  it('refuses bad rate fields by name with a problem, storing nothing', async () => {
    const queue = uniqueName('bad-rate');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 1, concurrencyKey: 'c' }, 'rateKey'],
      [{ rateKey: 'k', ratePeriodSeconds: 1 }, 'rateLimit'],
      [{ rateKey: 'k', rateLimit: 0, ratePeriodSeconds: 1 }, 'rateLimit'],
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 0.5 }, 'ratePeriodSeconds'],
      [{ rateLimit: 1, ratePeriodSeconds: 1 }, 'rateLimit'],
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 1, rateOnExcess: 'queue' }, 'rateOnExcess'],
      [{ rateKey: 'x'.repeat(257), rateLimit: 1, ratePeriodSeconds: 1 }, 'rateKey'],
    ];
    for (const [json, field] of cases) {
      const response = await postJson(`/v1/queues/${queue}/jobs`, json);
      expect(response.status, JSON.stringify(json)).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      const problem = (await problemOf(response)) as { errors?: Array<{ path: string }> };
      expect(problem.errors?.map((error) => error.path)).toContain(field);
    }
    const { jobs } = await success(api.v1.jobs.$get({ query: { queue } }));
    expect(jobs).toEqual([]);
  });
});
