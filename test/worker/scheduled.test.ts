import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { enqueueBatch, getJobEvents } from '../../src/engine';
import worker from '../../src/worker';
import { httpDatabase } from './support/databases';
import { runScheduled } from './support/run-scheduled';

/** A running job whose lease ends `leaseEndsInSeconds` from now (in the past when negative), of a worker long gone. */
async function insertRunningJob(leaseEndsInSeconds: number): Promise<string> {
  const db = httpDatabase(env);
  // Inserted waiting, as every job is, then started the way a claim starts it.
  const [row] = await db.query<{ id: string }>({
    text: `INSERT INTO skiplock.jobs (queue, type) VALUES ($1, 'worker-test') RETURNING id`,
    params: [`worker-test-${crypto.randomUUID()}`],
  });
  if (row === undefined) throw new Error('INSERT ... RETURNING returned no row');
  await db.query({
    text: `UPDATE skiplock.jobs
           SET state = 'running', attempts = 1, worker_id = 'gone-worker', lease_token = gen_random_uuid(),
               lease_expires_at = now() + make_interval(secs => $2), started_at = now() - interval '5 minutes'
           WHERE id = $1`,
    params: [row.id, leaseEndsInSeconds],
  });
  return row.id;
}

async function stateOf(id: string): Promise<string | undefined> {
  const [row] = await httpDatabase(env).query<{ state: string }>({
    text: 'SELECT state FROM skiplock.all_jobs WHERE id = $1',
    params: [id],
  });
  return row?.state;
}

describe('scheduled() in workerd', () => {
  it('puts a job whose lease expired back in the queue and leaves a live lease alone', async () => {
    const expired = await insertRunningJob(-60);
    const live = await insertRunningJob(600);

    await runScheduled(worker, '* * * * *');

    expect(await stateOf(expired)).toBe('queued');
    expect(await stateOf(live)).toBe('running');
  });

  it('runs a demo job: enqueued, then drained by scheduled() in dev mode, it ends succeeded', async () => {
    const [enqueued] = await enqueueBatch(httpDatabase(env), [
      { queue: `worker-test-${crypto.randomUUID()}`, type: 'noop' },
    ]);

    await runScheduled(worker, '* * * * *', new Date(), { SKIPLOCK_DEV: '1' });

    expect(await stateOf(enqueued!.job.id)).toBe('succeeded');
  });

  it('never runs a job twice when scheduled() invocations overlap', async () => {
    const queue = `worker-test-${crypto.randomUUID()}`;
    const enqueued = await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 20 }, () => ({ queue, type: 'sleep', payload: { ms: 100 } })),
    );

    await Promise.all([1, 2, 3].map(() => runScheduled(worker, '* * * * *', new Date(), { SKIPLOCK_DEV: '1' })));

    for (const { job } of enqueued) {
      expect(await stateOf(job.id)).toBe('succeeded');
      const kinds = (await getJobEvents(httpDatabase(env), job.id)).map((event) => event.kind);
      expect(kinds.filter((kind) => kind === 'claimed')).toHaveLength(1);
    }
  });
});
