import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { claimBatch, complete, enqueue, fail } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

describe('integrity enforced by the database', () => {
  it('refuses an illegal state transition issued as raw SQL, naming the constraint', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q' });
    const waiting = (await enqueue(db, { queue: 'q', delaySeconds: 60 })).job;
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
    await complete(db, claimed!);
    // A finished job's outcome is final, whoever issues the UPDATE.
    await expect(
      db.query({ text: "UPDATE skiplock.finished_jobs SET state = 'failed' WHERE id = $1", params: [job.id] }),
    ).rejects.toMatchObject({
      code: '23514',
      constraint: 'finished_jobs_state_final',
      message: 'illegal job state transition: succeeded -> failed',
    });
    // A live job moves only between waiting and running.
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'retrying' WHERE id = $1", params: [waiting.id] }),
    ).rejects.toMatchObject({
      code: '23514',
      constraint: 'jobs_legal_transition',
      message: 'illegal job state transition: scheduled -> retrying',
    });
    // Finishing is a move to the history, never a state of the queue table.
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'succeeded' WHERE id = $1", params: [waiting.id] }),
    ).rejects.toMatchObject({ code: '23514', constraint: 'jobs_state_live' });
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'nonsense' WHERE id = $1", params: [waiting.id] }),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('keeps the event log append-only', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'q' });
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
    await fail(db, { ...claimed!, error: { message: 'no' } });
    await expect(
      db.query({ text: "UPDATE skiplock.job_events SET kind = 'expired' WHERE job_id = $1", params: [claimed!.id] }),
    ).rejects.toThrow('skiplock.job_events is append-only');
  });

  it('makes one job of 50 concurrent enqueues with one dedup key, on 50 connections', async () => {
    const { url } = await open('pg');
    const clients = Array.from({ length: 50 }, () => pgDb(url, { max: 1 }));
    const results = await Promise.all(
      clients.map((db, i) => enqueue(db, { queue: 'q', dedupKey: 'invoice-42', payload: i })),
    );
    await Promise.all(clients.map((db) => db.close()));
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
    expect(results.filter((r) => !r.deduplicated)).toHaveLength(1);
  });
});
