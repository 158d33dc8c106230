import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { claimBatch, complete, enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

describe('integrity enforced by the database', () => {
  it('refuses an illegal state transition issued as raw SQL, naming it', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q' });
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
    await complete(db, claimed!);
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'running' WHERE id = $1", params: [job.id] }),
    ).rejects.toMatchObject({ code: '23514', message: 'illegal job state transition: succeeded -> running' });
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'queued' WHERE id = $1", params: [job.id] }),
    ).rejects.toThrow('illegal job state transition: succeeded -> queued');
    await expect(
      db.query({ text: "UPDATE skiplock.jobs SET state = 'nonsense' WHERE id = $1", params: [job.id] }),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('keeps the event log append-only', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q' });
    await expect(
      db.query({ text: "UPDATE skiplock.job_events SET kind = 'completed' WHERE job_id = $1", params: [job.id] }),
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
