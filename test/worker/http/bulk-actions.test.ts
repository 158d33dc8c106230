import { describe, expect, it } from 'vitest';
import {
  claimOne,
  client,
  createKey,
  enqueueJob,
  expectStatus,
  postJson,
  problemOf,
  success,
  uniqueName,
} from './support/api';

const api = client();

/** A job of `queue` that failed for good. */
async function failedJob(queue: string, tenant?: string) {
  await enqueueJob(queue, { tenant });
  const job = await claimOne(queue);
  const fail = api.v1.jobs[':id'].fail.$post({
    param: { id: job.id },
    json: { leaseToken: job.leaseToken, error: { message: 'boom' }, forGood: true },
  });
  await success(fail);
  return job.id;
}

describe('POST /v1/jobs/bulk', () => {
  it('counts in a dry run, then redrives the dead jobs of a queue into another, each with its event', async () => {
    const queue = uniqueName('dead');
    const replay = uniqueName('replay');
    const ids = [await failedJob(queue), await failedJob(queue), await failedJob(queue)];

    const dead = await success(api.v1['dead-jobs'].$get({ query: { queue } }));
    expect(dead.jobs.map((job) => job.id).sort()).toEqual([...ids].sort());

    const dry = await success(api.v1.jobs.bulk.$post({ json: { action: 'redrive', filter: { queue }, dryRun: true } }));
    expect(dry).toEqual({
      action: 'redrive',
      dryRun: true,
      matched: 3,
      changed: 0,
      byStatus: { failed: 3 },
      batches: 0,
      nextCursor: null,
    });

    const done = await success(
      api.v1.jobs.bulk.$post({ json: { action: 'redrive', filter: { queue }, limit: 2, toQueue: replay } }),
    );
    expect(done).toMatchObject({ matched: 2, changed: 2, nextCursor: null });
    const moved = await success(api.v1.jobs.$get({ query: { queue: replay } }));
    expect(moved.jobs).toHaveLength(2);
    expect(moved.jobs[0]).toMatchObject({ status: 'queued', attempts: 0 });
    const events = await success(api.v1.jobs[':id'].history.$get({ param: { id: moved.jobs[0]!.id } }));
    expect(events.events.at(-1)).toMatchObject({ kind: 'retried', detail: { bulk: 'redrive', fromQueue: queue } });
  });

  it('cancels, then retries, every job of a queue; a filter that matches nothing answers 0', async () => {
    const queue = uniqueName('bulk');
    await enqueueJob(queue, { type: 'a' });
    await enqueueJob(queue, { type: 'a' });
    await enqueueJob(queue, { type: 'b' });
    const cancelled = await success(
      api.v1.jobs.bulk.$post({ json: { action: 'cancel', filter: { queue, type: 'a' } } }),
    );
    expect(cancelled).toMatchObject({ matched: 2, changed: 2, cancelRequested: 0 });
    const retried = await success(
      api.v1.jobs.bulk.$post({ json: { action: 'retry', filter: { queue, status: ['cancelled'] } } }),
    );
    expect(retried).toMatchObject({ matched: 2, changed: 2 });
    const none = await success(
      api.v1.jobs.bulk.$post({ json: { action: 'delete', filter: { queue: uniqueName('empty') } } }),
    );
    expect(none).toMatchObject({ matched: 0, changed: 0 });
  });

  it('refuses bad input by name with application/problem+json, and changes nothing', async () => {
    const queue = uniqueName('refused');
    await enqueueJob(queue);
    const cases: Array<[unknown, string]> = [
      [{ action: 'cancel' }, 'all'],
      [{ action: 'cancel', filter: {} }, 'all'],
      [{ action: 'purge', filter: { queue } }, 'action'],
      [{ action: 'cancel', filter: { queue, status: 'done' } }, 'filter.status'],
      [{ action: 'cancel', filter: { queue, createdAfter: 'yesterday' } }, 'filter.createdAfter'],
      [{ action: 'cancel', filter: { queue, colour: 'red' } }, 'filter'],
      [{ action: 'cancel', filter: { queue }, limit: 0 }, 'limit'],
      [{ action: 'cancel', filter: { queue }, toQueue: 'x' }, ''],
      [{ action: 'reschedule', filter: { queue } }, 'change'],
      [{ action: 'reschedule', filter: { queue }, change: {} }, 'change'],
      [{ action: 'cancel', filter: { queue }, cursor: 'not-a-cursor' }, 'cursor'],
    ];
    for (const [body, field] of cases) {
      const response = await postJson('/v1/jobs/bulk', body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      const problem = await problemOf(response);
      expect(JSON.stringify(problem), JSON.stringify(body)).toContain(field);
    }
    const page = await success(api.v1.jobs.$get({ query: { queue } }));
    expect(page.jobs.map((job) => job.status)).toEqual(['queued']);
  });

  it('needs the operator scope; a tenant-bound operator key acts on its own tenant only', async () => {
    const queue = uniqueName('tenants');
    const mine = uniqueName('mine');
    const theirs = uniqueName('theirs');
    await enqueueJob(queue, { tenant: mine });
    await enqueueJob(queue, { tenant: theirs });

    const unbound = await postJson(
      '/v1/jobs/bulk',
      { action: 'cancel', filter: { queue } },
      await createKey(['enqueue', 'read']),
    );
    expect(unbound.status).toBe(403);

    const bound = client(await createKey(['operator'], mine));
    const other = await bound.v1.jobs.bulk.$post({ json: { action: 'cancel', filter: { queue, tenant: theirs } } });
    expectStatus(other, 200);
    expect(await other.json()).toMatchObject({ matched: 0, changed: 0 });
    const own = await success(bound.v1.jobs.bulk.$post({ json: { action: 'cancel', filter: { queue } } }));
    expect(own).toMatchObject({ matched: 1, changed: 1 });

    const jobs = await success(api.v1.jobs.$get({ query: { queue } }));
    expect(Object.fromEntries(jobs.jobs.map((job) => [job.tenant, job.status]))).toEqual({
      [mine]: 'cancelled',
      [theirs]: 'queued',
    });
  });
});
