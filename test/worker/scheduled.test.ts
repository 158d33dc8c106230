import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import worker from '../../src/worker';
import { httpDatabase } from '../../src/worker/database';
import { runScheduled } from './support/run-scheduled';

/** A running job whose lease ends `leaseEndsInSeconds` from now (in the past when negative). */
async function insertRunningJob(leaseEndsInSeconds: number): Promise<string> {
  const [row] = await httpDatabase(env).query<{ id: string }>({
    text: `INSERT INTO skiplock.jobs (queue, type, state, attempts, worker_id, lease_token, lease_expires_at, started_at)
           VALUES ($1, 'worker-test', 'running', 1, 'gone-worker', gen_random_uuid(),
                   now() + make_interval(secs => $2), now() - interval '5 minutes')
           RETURNING id`,
    params: [`worker-test-${crypto.randomUUID()}`, leaseEndsInSeconds],
  });
  if (row === undefined) throw new Error('INSERT ... RETURNING returned no row');
  return row.id;
}

async function stateOf(id: string): Promise<string | undefined> {
  const [row] = await httpDatabase(env).query<{ state: string }>({
    text: 'SELECT state FROM skiplock.jobs WHERE id = $1',
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
});
