import { describe, expect, it } from 'vitest';
import {
  claimBatch,
  complete,
  enqueue,
  enqueueBatch,
  expireJobs,
  extendLease,
  getJob,
  getJobEvents,
  pruneFinishedJobs,
  reapExpiredLeases,
  refreshStatistics,
  releaseLapsedDedupKeys,
  releaseWorker,
  StaleLeaseError,
} from '../../src/engine';
import type { Db } from '../../src/db/types';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/** Moves a job's lease into the past, as if its worker vanished long ago. */
async function expireLease(db: Db, id: string): Promise<void> {
  await db.query({
    text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    params: [id],
  });
}

describe('maintenance', () => {
  it('reaps an expired lease: the job runs again, and the old token is refused', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', maxAttempts: 3 });
    const [first] = await claimBatch(db, { max: 1, workerId: 'crashed' });
    expect(await reapExpiredLeases(db)).toEqual([]);
    await expireLease(db, job.id);
    const [reaped] = await reapExpiredLeases(db);
    expect(reaped).toMatchObject({ id: job.id, status: 'queued', attempts: 1 });
    const [second] = await claimBatch(db, { max: 1, workerId: 'healthy' });
    expect(second).toMatchObject({ id: job.id, attempts: 2 });
    await expect(complete(db, first!)).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(extendLease(db, first!)).rejects.toBeInstanceOf(StaleLeaseError);
    expect(await complete(db, second!)).toMatchObject({ status: 'succeeded', workerId: 'healthy' });
    const kinds = (await getJobEvents(db, job.id)).map((e) => [e.kind, e.attempt, e.workerId]);
    expect(kinds).toEqual([
      ['enqueued', 0, null],
      ['claimed', 1, 'crashed'],
      ['lease_expired', 1, 'crashed'],
      ['claimed', 2, 'healthy'],
      ['completed', 2, 'healthy'],
    ]);
  });

  it('fails a job whose lease expired on its last attempt', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', maxAttempts: 1 });
    await claimBatch(db, { max: 1, workerId: 'w' });
    await expireLease(db, job.id);
    const [reaped] = await reapExpiredLeases(db);
    expect(reaped).toMatchObject({ status: 'failed', lastError: { message: 'lease expired before the job finished' } });
  });

  it('releases every lease of a named worker at once', async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, Array.from({ length: 4 }, () => ({ queue: 'q' })));
    await claimBatch(db, { max: 3, workerId: 'restarting' });
    await claimBatch(db, { max: 1, workerId: 'other' });
    const released = await releaseWorker(db, 'restarting');
    expect(released.map((job) => job.status)).toEqual(['queued', 'queued', 'queued']);
    expect(await claimBatch(db, { max: 10, workerId: 'w' })).toHaveLength(3);
  });

  it('expires jobs not started by their expiry, which then never run', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', ttlSeconds: 0.001 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await claimBatch(db, { max: 1, workerId: 'w' })).toEqual([]);
    expect(await expireJobs(db)).toBe(1);
    expect(await getJob(db, job.id)).toMatchObject({ status: 'expired', startedAt: null });
    expect(await expireJobs(db)).toBe(0);
  });

  it('frees a dedup key once its window has passed', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', dedupKey: 'k', dedupWindowSeconds: 60 });
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
    await complete(db, claimed!);
    expect(await releaseLapsedDedupKeys(db)).toBe(0);
    await db.query({ text: "UPDATE skiplock.jobs SET finished_at = now() - interval '2 minutes' WHERE id = $1", params: [job.id] });
    // The enqueue itself notices the lapsed window, before any sweep ran.
    const fresh = await enqueue(db, { queue: 'q', dedupKey: 'k' });
    expect(fresh.deduplicated).toBe(false);
    expect(fresh.job.id).not.toBe(job.id);
    expect((await getJob(db, job.id))!.dedupKey).toBeNull();
  });

  it('prunes finished jobs past retention in bounded batches, with their events, and nothing else', async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, Array.from({ length: 5 }, () => ({ queue: 'q' })));
    const claimed = await claimBatch(db, { max: 3, workerId: 'w' });
    for (const job of claimed) await complete(db, job);
    await db.query({ text: "UPDATE skiplock.jobs SET finished_at = now() - interval '2 days' WHERE state = 'succeeded'", params: [] });
    expect(await pruneFinishedJobs(db, { retentionSeconds: 86_400, limit: 2 })).toBe(2);
    expect(await pruneFinishedJobs(db, { retentionSeconds: 86_400, limit: 2 })).toBe(1);
    expect(await pruneFinishedJobs(db, { retentionSeconds: 86_400, limit: 2 })).toBe(0);
    const [counts] = await db.query<{ jobs: number; orphan_events: number }>({
      text: `SELECT (SELECT count(*)::integer FROM skiplock.jobs) AS jobs,
                    (SELECT count(*)::integer FROM skiplock.job_events e
                     WHERE NOT EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = e.job_id)) AS orphan_events`,
      params: [],
    });
    expect(counts).toEqual({ jobs: 2, orphan_events: 0 });
  });

  it('analyzes the jobs table once it changed more than it holds, and not again until it does', async () => {
    const { db } = await open('pg');
    const lastAnalyzed = async () =>
      (await db.query<{ at: string | null }>({
        text: "SELECT greatest(last_analyze, last_autoanalyze)::text AS at FROM pg_stat_user_tables WHERE relid = 'skiplock.jobs'::regclass",
        params: [],
      }))[0]!.at;
    expect(await refreshStatistics(db)).toBe(false);
    await enqueueBatch(db, Array.from({ length: 1000 }, () => ({ queue: 'q' })));
    await enqueueBatch(db, Array.from({ length: 500 }, () => ({ queue: 'q' })));
    // Counters reach pg_stat_user_tables within a second of the inserting transaction.
    let refreshed = false;
    for (const started = Date.now(); !refreshed && Date.now() - started < 10_000; ) {
      refreshed = await refreshStatistics(db);
      if (!refreshed) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(refreshed).toBe(true);
    expect(await lastAnalyzed()).not.toBeNull();
    expect(await refreshStatistics(db)).toBe(false);
  });
});
