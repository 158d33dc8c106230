import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../src/drain/define-job';
import { claimBatch, completeMany, enqueueBatch } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain } from './support/drain';

const open = engineDatabases();

describe('the housekeeping a drain does first', () => {
  it('hands back expired leases, runs those jobs, and prunes finished jobs past retention', async () => {
    const { db } = await open('pg');
    const work = defineJob('work', z.unknown(), () => 'done');
    await enqueueBatch(
      db,
      Array.from({ length: 6 }, () => ({ queue: 'work' })),
    );
    const finished = await claimBatch(db, { max: 3, workerId: 'earlier' });
    await completeMany(db, finished);
    // Two days ago: a day with no partition of its own, so they wait in the default one.
    await db.query({ text: "UPDATE skiplock.finished_jobs SET finished_at = now() - interval '2 days'", params: [] });
    await claimBatch(db, { max: 2, workerId: 'crashed' });
    await db.query({
      text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 s' WHERE state = 'running'",
      params: [],
    });

    const counts = await drain(db, [work], { retentionSeconds: 86_400 });

    expect(counts).toMatchObject({ reaped: 2, deletedJobs: 3, claimed: 3, succeeded: 3 });
    const rows = await db.query<{ state: string; attempts: number }>({
      text: 'SELECT state, attempts FROM skiplock.all_jobs ORDER BY id',
      params: [],
    });
    expect(rows).toEqual([
      { state: 'succeeded', attempts: 2 },
      { state: 'succeeded', attempts: 2 },
      { state: 'succeeded', attempts: 1 },
    ]);
  });

  it("writes a definition's retention where every drain's pruning reads it", async () => {
    const { db } = await open('pg');
    const ping = defineJob('ping', z.unknown(), () => 'pong', { retentionSeconds: 'none' });
    const other = defineJob('other', z.unknown(), () => 'done');
    await enqueueBatch(db, [{ queue: 'ping' }, { queue: 'ping' }, { queue: 'other' }]);

    expect(await drain(db, [ping, other])).toMatchObject({ succeeded: 3, deletedJobs: 0 });
    // Once the statistics have summed them, a drain that does not run the type prunes its jobs too.
    await db.query({ text: 'UPDATE skiplock.attempt_stats_rollup SET rolled_through = now()', params: [] });
    expect(await drain(db, [other])).toMatchObject({ deletedJobs: 2 });
    const left = await db.query<{ type: string }>({ text: 'SELECT type FROM skiplock.all_jobs', params: [] });
    expect(left).toEqual([{ type: 'other' }]);
  });
});
