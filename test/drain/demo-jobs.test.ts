import { describe, expect, it } from 'vitest';
import { builtInJobs } from '../../src/drain/handlers/built-in';
import { demoJobs } from '../../src/drain/handlers/demo';
import { sleep } from '../../src/engine/sleep';
import { enqueue, getJobEvents } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from './support/drain';

const open = engineDatabases();

describe('the demo jobs (SPEC section 3)', () => {
  it('are registered only in dev mode', () => {
    const http = { allowedHosts: [] };
    expect(builtInJobs({ devMode: false, http }).map((job) => job.type)).toEqual(['http']);
    expect(builtInJobs({ devMode: true, http }).map((job) => job.type)).toEqual([
      'http',
      'noop',
      'sleep',
      'fail',
      'demo-workflow',
    ]);
  });

  it('noop succeeds at once with { ok: true }', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'demo', type: 'noop' });

    await drain(db, demoJobs);

    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', attempts: 1, result: { ok: true } });
  });

  it('sleep waits its ms, heartbeating past a shorter lease, then succeeds', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'demo', type: 'sleep', payload: { ms: 2500 }, leaseSeconds: 1 });

    await drain(db, demoJobs);

    const done = await jobById(db, job.id);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 1, result: { ok: true, sleptMs: 2500 } });
    expect(done.durationMs).toBeGreaterThanOrEqual(2500);
    expect((await getJobEvents(db, job.id)).map((event) => event.kind)).not.toContain('lease_expired');
  });

  it('fail throws on its first n attempts, then succeeds', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, {
      queue: 'demo',
      type: 'fail',
      payload: { times: 2 },
      backoffBaseSeconds: 0.01,
      backoffMaxSeconds: 0.01,
    });

    for (let round = 0; round < 20 && (await jobById(db, job.id)).status !== 'succeeded'; round++) {
      await drain(db, demoJobs);
      await sleep(20);
    }

    expect(await jobById(db, job.id)).toMatchObject({
      status: 'succeeded',
      attempts: 3,
      result: { ok: true, attempts: 3 },
      lastError: { message: 'planned failure 2 of 2' },
    });
  });
});
