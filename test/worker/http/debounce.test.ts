import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, client, createKey, postJson, problemOf, request, success, uniqueName } from './support/api';

const api = client();

interface Answer {
  id: string;
  status: string;
  payload?: unknown;
  runAt?: string;
  deduplicated: boolean;
  debounced: boolean;
  replaced: boolean;
}

async function enqueueAt(queue: string, json: Record<string, unknown>, status: number, apiKey?: string) {
  const response = await postJson(`/v1/queues/${queue}/jobs`, json, apiKey);
  expect(response.status, await response.clone().text()).toBe(status);
  return (await response.json()) as Answer;
}

describe('debounce and dedup conflicts over HTTP', () => {
  it('debounces into the waiting job: 200, debounced, the job says why it waits', async () => {
    const queue = uniqueName('debounce');
    const debounce = { debounceKey: 'acct-1', debouncePeriodSeconds: 60, debounceMaxDelaySeconds: 600 };
    const first = await enqueueAt(queue, { payload: 1, ...debounce }, 201);
    expect(first).toMatchObject({ status: 'scheduled', deduplicated: false, debounced: false, replaced: false });
    const second = await enqueueAt(queue, { payload: 2, ...debounce }, 200);
    expect(second).toMatchObject({ id: first.id, payload: 2, deduplicated: true, debounced: true });

    const history = await success(api.v1.jobs[':id'].history.$get({ param: { id: first.id } }));
    expect(history.events.map((event) => event.kind)).toEqual(['enqueued', 'debounced', 'debounced']);
    const steps = await success(api.v1.jobs[':id'].steps.$get({ param: { id: first.id } }));
    expect(steps.waitingFor).toEqual([{ kind: 'debounce', key: 'acct-1', until: second.runAt, enqueues: 2 }]);

    // A key without the read scope learns the job's id and that it was debounced, nothing more.
    const enqueueOnly = await createKey(['enqueue']);
    const third = await enqueueAt(queue, { payload: 3, ...debounce }, 200, enqueueOnly);
    expect(Object.keys(third).sort()).toEqual(['debounced', 'deduplicated', 'id', 'replaced', 'status', 'statusUrl']);
    expect(third).toMatchObject({ id: first.id, debounced: true });

    const batch = await postJson(`/v1/queues/${queue}/jobs/batch`, {
      jobs: [
        { payload: 4, ...debounce },
        { payload: 5, ...debounce },
      ],
    });
    expect(batch.status).toBe(200);
    const { jobs } = (await batch.json()) as { jobs: Answer[] };
    expect(jobs.map((job) => [job.id, job.debounced])).toEqual([
      [first.id, true],
      [first.id, true],
    ]);
  });

  it('replace changes the waiting job, refuse answers 409 naming it', async () => {
    const queue = uniqueName('dedup-modes');
    const first = await enqueueAt(queue, { payload: 'a', dedupKey: 'k' }, 201);
    const replaced = await enqueueAt(queue, { payload: 'b', dedupKey: 'k', dedupOnConflict: 'replace' }, 200);
    expect(replaced).toMatchObject({ id: first.id, payload: 'b', replaced: true, debounced: false });

    const refused = await postJson(`/v1/queues/${queue}/jobs`, {
      payload: 'c',
      dedupKey: 'k',
      dedupOnConflict: 'refuse',
    });
    expect(refused.status).toBe(409);
    const problem = await problemOf(refused);
    expect(problem.type).toMatch(/dedup-conflict$/);
    expect(problem.detail).toContain(first.id);
    expect(problem.errors).toEqual([{ path: 'dedupKey', message: `held by job ${first.id}` }]);

    // A running job cannot be replaced: 409, unless the scope is waiting, where a new job waits.
    await success(api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'w', max: 1 } }));
    const running = await postJson(`/v1/queues/${queue}/jobs`, { dedupKey: 'k', dedupOnConflict: 'replace' });
    expect(running.status).toBe(409);
    expect((await problemOf(running)).detail).toMatch(/started, so it cannot be replaced/);
    const next = await enqueueAt(queue, { dedupKey: 'k', dedupOnConflict: 'replace', dedupScope: 'waiting' }, 201);
    expect(next.id).not.toBe(first.id);
  });

  it('refuses bad input by name with a 400 problem, storing nothing', async () => {
    const queue = uniqueName('bad-debounce');
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ debounceKey: 'a', debouncePeriodSeconds: 0 }, 'debouncePeriodSeconds'],
      [{ debounceKey: 'a' }, 'debouncePeriodSeconds'],
      [{ debounceKey: 'a', debouncePeriodSeconds: 10, debounceMaxDelaySeconds: 5 }, 'debounceMaxDelaySeconds'],
      [{ debounceKey: 'x'.repeat(257), debouncePeriodSeconds: 10 }, 'debounceKey'],
      [{ debounceKey: 'a', debouncePeriodSeconds: 10, orderingKey: 'o' }, 'debounceKey'],
      [{ debounceKey: 'a', debouncePeriodSeconds: 10, dedupKey: 'd' }, 'debounceKey'],
      [{ debounceKey: 'a', debouncePeriodSeconds: 10, delaySeconds: 3 }, 'debounceKey'],
      [{ dedupOnConflict: 'replace' }, 'dedupOnConflict'],
      [{ dedupScope: 'waiting' }, 'dedupScope'],
      [{ dedupKey: 'd', dedupScope: 'waiting', dedupWindowSeconds: 5 }, 'dedupWindowSeconds'],
    ];
    for (const [json, field] of cases) {
      const response = await postJson(`/v1/queues/${queue}/jobs`, json);
      expect(response.status, JSON.stringify(json)).toBe(400);
      const problem = await problemOf(response);
      expect(problem.errors?.map((error) => error.path)).toContain(field);
    }
    const idempotent = await request(`/v1/queues/${queue}/jobs`, {
      method: 'POST',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json', 'idempotency-key': 'once' },
      body: JSON.stringify({ debounceKey: 'a', debouncePeriodSeconds: 10 }),
    });
    expect(idempotent.status).toBe(400);
    expect((await problemOf(idempotent)).errors?.map((error) => error.path)).toEqual(['debounceKey']);
    const { jobs } = await success(api.v1.jobs.$get({ query: { queue } }));
    expect(jobs).toEqual([]);
  });
});
