import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { bulkAction, claimBatch, enqueue, fail, retry, setQueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/** The columns a requeue sets afresh; every other column of `skiplock.jobs` is the finished job's. */
const RESET: Record<string, unknown> = {
  state: 'queued',
  attempts: 0,
  expires_at: null,
  worker_id: null,
  lease_token: null,
  lease_expires_at: null,
  cancel_requested_at: null,
};

async function failedJob(db: Db, queue: string): Promise<string> {
  const { job } = await enqueue(db, {
    queue,
    type: 'sync',
    tenant: 'acme',
    payload: { account: 7 },
    priority: 3,
    maxAttempts: 1,
    leaseSeconds: 90,
    tags: ['nightly', 'crm'],
    ttlSeconds: 3600,
  });
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: [queue] });
  await db.query({
    text: 'UPDATE skiplock.jobs SET progress = $2 WHERE id = $1',
    params: [job.id, JSON.stringify({ done: 40 })],
  });
  await fail(db, { ...claimed!, error: { message: 'crm down' }, forGood: true });
  return job.id;
}

/** The job's row; a live one with its tags, which live beside it in skiplock.job_tags. */
async function row(db: Db, table: 'jobs' | 'finished_jobs', id: string): Promise<Record<string, unknown>> {
  const tags =
    table === 'jobs'
      ? `|| jsonb_build_object('tags', (SELECT g.tags FROM skiplock.job_tags g WHERE g.job_id = t.id))`
      : '';
  const [found] = await db.query<{ row: Record<string, unknown> }>({
    text: `SELECT to_jsonb(t) ${tags} AS row FROM skiplock.${table} t WHERE t.id = $1`,
    params: [id],
  });
  expect(found, `${id} in skiplock.${table}`).toBeDefined();
  return found!.row;
}

/** Each column of the live row is the finished job's, but for the queue, the run time and {@link RESET}. */
async function expectRequeued(db: Db, id: string, finished: Record<string, unknown>, queue: string) {
  const live = await row(db, 'jobs', id);
  const columns = Object.keys(live);
  for (const column of columns.filter((name) => !(name in RESET) && name !== 'queue' && name !== 'run_at'))
    expect(live[column], column).toEqual(finished[column]);
  expect(live).toMatchObject({ ...RESET, queue });
  expect(Date.parse(live.run_at as string)).toBeGreaterThan(Date.parse(finished.finished_at as string) - 1);
  // The finished job had something in each column the requeue keeps, so a column it dropped would show.
  for (const kept of ['payload', 'progress', 'last_error', 'tags', 'first_started_at', 'started_at', 'priority'])
    expect(live[kept], kept).not.toBeNull();
}

describe('a finished job put back among the live jobs (skiplock.requeued_job)', () => {
  it('keeps every column a retry, a redrive into another queue and a dead-letter move do not reset', async () => {
    const { db } = await open('pg');

    const retried = await failedJob(db, 'crm');
    const before = await row(db, 'finished_jobs', retried);
    expect((await retry(db, retried))?.retried).toBe(true);
    await expectRequeued(db, retried, before, 'crm');

    const redriven = await failedJob(db, 'crm-batch');
    const beforeRedrive = await row(db, 'finished_jobs', redriven);
    const moved = await bulkAction(db, { action: 'redrive', filter: { queue: 'crm-batch' }, toQueue: 'crm-replay' });
    expect(moved.changed).toBe(1);
    await expectRequeued(db, redriven, beforeRedrive, 'crm-replay');

    await setQueue(db, 'crm-live', { concurrency: null, weight: 1, deadLetterQueue: 'crm-dead' });
    const dead = await failedJob(db, 'crm-live');
    // The trigger moved it in the statement that finished it; its finished row is gone.
    expect(await db.query({ text: 'SELECT 1 FROM skiplock.finished_jobs WHERE id = $1', params: [dead] })).toHaveLength(
      0,
    );
    const live = await row(db, 'jobs', dead);
    expect(live).toMatchObject({ ...RESET, queue: 'crm-dead', tags: ['nightly', 'crm'], progress: { done: 40 } });
    expect(live.last_error).toMatchObject({ message: 'crm down' });
  });
});
