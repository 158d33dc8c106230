import pg from 'pg';
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
  fail,
  maintainHistory,
  pruneEvents,
  reapExpiredLeases,
  refreshStatistics,
  releaseLapsedDedupKeys,
  releaseWorker,
  StaleLeaseError,
} from '../../src/engine';
import { maintenanceDue } from '../../src/engine/maintenance-due';
import type { Db } from '../../src/db/types';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';

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
    await enqueueBatch(
      db,
      Array.from({ length: 4 }, () => ({ queue: 'q' })),
    );
    await claimBatch(db, { max: 3, workerId: 'restarting' });
    await claimBatch(db, { max: 1, workerId: 'other' });
    const released = await releaseWorker(db, 'restarting');
    expect(released.map((job) => job.status)).toEqual(['queued', 'queued', 'queued']);
    expect(await claimBatch(db, { max: 10, workerId: 'w' })).toHaveLength(3);
  });

  it('probes for due maintenance: each kind is found when due, and nothing while nothing is', async () => {
    const { db } = await open('pg');
    const none = { leasesExpired: false, jobsExpired: false, dedupKeysLapsed: false };
    const { job: leased } = await enqueue(db, { queue: 'leased' });
    await claimBatch(db, { max: 1, workerId: 'w', queues: ['leased'] });
    const { job: expiring } = await enqueue(db, { queue: 'waiting', ttlSeconds: 3600 });
    const { job: keyed } = await enqueue(db, { queue: 'keyed', dedupKey: 'k', dedupWindowSeconds: 60 });
    expect(await maintenanceDue(db)).toEqual(none);

    await expireLease(db, leased.id);
    expect(await maintenanceDue(db)).toEqual({ ...none, leasesExpired: true });
    await db.query({
      text: "UPDATE skiplock.jobs SET expires_at = now() - interval '1 second' WHERE id = $1",
      params: [expiring.id],
    });
    expect(await maintenanceDue(db)).toEqual({ ...none, leasesExpired: true, jobsExpired: true });
    await db.query({
      text: "UPDATE skiplock.dedup_keys SET expires_at = now() - interval '1 second' WHERE job_id = $1",
      params: [keyed.id],
    });
    expect(await maintenanceDue(db)).toEqual({ leasesExpired: true, jobsExpired: true, dedupKeysLapsed: true });

    expect(await reapExpiredLeases(db)).toHaveLength(1);
    expect(await expireJobs(db)).toBe(1);
    expect(await releaseLapsedDedupKeys(db)).toBe(1);
    expect(await maintenanceDue(db)).toEqual(none);
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

  it("keeps a finished job's dedup key for its window, then frees it", async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', dedupKey: 'k', dedupWindowSeconds: 60 });
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
    await complete(db, claimed!);
    expect(await enqueue(db, { queue: 'q', dedupKey: 'k' })).toMatchObject({ deduplicated: true, job: { id: job.id } });
    expect(await releaseLapsedDedupKeys(db)).toBe(0);
    const lapse = (id: string) =>
      db.query({
        text: "UPDATE skiplock.dedup_keys SET expires_at = now() - interval '1 second' WHERE job_id = $1",
        params: [id],
      });
    await lapse(job.id);
    // The enqueue itself takes over a lapsed key, before any sweep ran.
    const fresh = await enqueue(db, { queue: 'q', dedupKey: 'k', dedupWindowSeconds: 60 });
    expect(fresh.deduplicated).toBe(false);
    expect(fresh.job.id).not.toBe(job.id);
    expect(await enqueue(db, { queue: 'q', dedupKey: 'k' })).toMatchObject({
      deduplicated: true,
      job: { id: fresh.job.id },
    });
    // The sweep frees lapsed keys of jobs nobody enqueued again, and only those.
    const [second] = await claimBatch(db, { max: 1, workerId: 'w' });
    await complete(db, second!);
    await lapse(fresh.job.id);
    expect(await releaseLapsedDedupKeys(db)).toBe(1);
    expect(await db.query({ text: 'SELECT 1 FROM skiplock.dedup_keys', params: [] })).toEqual([]);
  });

  it('drops the days of finished jobs past the retention with their steps and links, and nothing else', async () => {
    const { db } = await open('pg');
    // The template was migrated when the run began: after midnight UTC a day ahead is still to make.
    await maintainHistory(db, { retentionSeconds: 86_400 });
    const finishOne = async (queue: string) => {
      await enqueue(db, { queue });
      const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: [queue] });
      await complete(db, claimed!);
      return claimed!.id;
    };
    const recent = await finishOne('q');
    // A day long past, with a partition of its own, and a job that finished then.
    const old = await finishOne('q');
    await db.query({
      text: `CREATE TABLE skiplock.finished_jobs_20200101 PARTITION OF skiplock.finished_jobs
             FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`,
      params: [],
    });
    await db.query({
      text: "UPDATE skiplock.finished_jobs SET finished_at = '2020-01-01 12:00+00' WHERE id = $1",
      params: [old],
    });
    // A job that finished two days ago, on a day without a partition: it waits in the default one.
    const stray = await finishOne('q');
    await db.query({
      text: "UPDATE skiplock.finished_jobs SET finished_at = now() - interval '2 days' WHERE id = $1",
      params: [stray],
    });
    const waiting = (await enqueue(db, { queue: 'waiting' })).job.id;
    // Each job's history of durable steps: a step, and a link to the job it waited for.
    await db.query({
      text: `INSERT INTO skiplock.job_steps (job_id, name, kind, done, result)
             SELECT id, 'charge', 'do', true, '{}' FROM unnest($1::uuid[]) AS id`,
      params: [[recent, old, stray, waiting]],
    });
    await db.query({
      text: `INSERT INTO skiplock.job_links (job_id, other_id, kind, step_name)
             SELECT id, $2, 'child', 'child' FROM unnest($1::uuid[]) AS id`,
      params: [[recent, old, stray], waiting],
    });
    // An event kept past its window, and one still in it.
    await db.query({
      text: `INSERT INTO skiplock.events (tenant, name, key, payload, sent_at, expires_at)
             VALUES ('default', 'lapsed', '', 'null', now() - interval '2 days', now() - interval '1 day'),
                    ('default', 'kept', '', 'null', now(), now() + interval '1 day')`,
      params: [],
    });
    const history = async () =>
      (
        await db.query<{ steps: string[]; links: string[]; events: string[] }>({
          text: `SELECT (SELECT coalesce(array_agg(job_id::text ORDER BY job_id), '{}') FROM skiplock.job_steps) AS steps,
                        (SELECT coalesce(array_agg(job_id::text ORDER BY job_id), '{}') FROM skiplock.job_links) AS links,
                        (SELECT coalesce(array_agg(name ORDER BY name), '{}') FROM skiplock.events) AS events`,
          params: [],
        })
      )[0]!;

    expect(await maintainHistory(db, { retentionSeconds: 86_400 })).toEqual({
      createdDays: 0,
      droppedDays: 1,
      deletedJobs: 1,
    });
    const kept = [recent, waiting].sort();
    expect(await history()).toEqual({ steps: kept, links: [recent], events: ['kept'] });
    expect(await getJob(db, old)).toBeUndefined();
    expect(await getJob(db, stray)).toBeUndefined();
    expect(await getJob(db, recent)).toMatchObject({ status: 'succeeded' });
    expect(await getJob(db, waiting)).toMatchObject({ status: 'queued' });
    const partitions = await db.query<{ name: string }>({
      text: "SELECT relname AS name FROM pg_class WHERE relname LIKE 'finished\\_jobs\\_2%' ORDER BY 1",
      params: [],
    });
    expect(partitions.map((p) => p.name)).not.toContain('finished_jobs_20200101');
    // Today and the next two days exist, made by the migration or by this call.
    const today = new Date().toISOString().slice(0, 10).replaceAll('-', '');
    expect(partitions.map((p) => p.name)).toContain(`finished_jobs_${today}`);
    expect(await maintainHistory(db, { retentionSeconds: 86_400 })).toEqual({
      createdDays: 0,
      droppedDays: 0,
      deletedJobs: 0,
    });
  });

  it('two housekeeping calls meeting over the days ahead: the one that finds the default partition locked leaves its work to the next call', async () => {
    const { db, url } = await open('pg');
    await maintainHistory(db, { retentionSeconds: 86_400 });
    // Another call, in the middle of making a day's partition, holds the lock on the default one.
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`CREATE TABLE skiplock.finished_jobs_29991231 PARTITION OF skiplock.finished_jobs
                         FOR VALUES FROM ('2999-12-31 00:00+00') TO ('3000-01-01 00:00+00')`);
      // Days ahead with no partition yet, whose check reads the locked default partition.
      const [meeting] = await db.query<{ created: number; dropped: number; deleted: number }>({
        text: "SELECT * FROM skiplock.maintain_finished_jobs(interval '1 day', 5)",
        params: [],
      });
      expect(meeting).toEqual({ created: 0, dropped: 0, deleted: 0 });
      await other.query('COMMIT');
    } finally {
      await other.end();
    }
    const [next] = await db.query<{ created: number }>({
      text: "SELECT created FROM skiplock.maintain_finished_jobs(interval '1 day', 5)",
      params: [],
    });
    expect(next?.created).toBe(3);
  });

  it('prunes events past the retention in bounded batches', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'q' })),
    );
    for (const job of await claimBatch(db, { max: 3, workerId: 'w' })) {
      await fail(db, { ...job, error: { message: 'no' }, forGood: true });
    }
    await db.query({ text: 'ALTER TABLE skiplock.job_events DISABLE TRIGGER job_events_append_only', params: [] });
    await db.query({ text: "UPDATE skiplock.job_events SET at = now() - interval '2 days'", params: [] });
    await db.query({ text: 'ALTER TABLE skiplock.job_events ENABLE TRIGGER job_events_append_only', params: [] });
    await enqueue(db, { queue: 'q' });
    const [late] = await claimBatch(db, { max: 1, workerId: 'w' });
    await fail(db, { ...late!, error: { message: 'later' }, forGood: true });
    expect(await pruneEvents(db, { retentionSeconds: 86_400, limit: 2 })).toBe(2);
    expect(await pruneEvents(db, { retentionSeconds: 86_400, limit: 2 })).toBe(1);
    expect(await pruneEvents(db, { retentionSeconds: 86_400, limit: 2 })).toBe(0);
    const left = await db.query<{ job_id: string }>({ text: 'SELECT job_id FROM skiplock.job_events', params: [] });
    expect(left.map((e) => e.job_id)).toEqual([late!.id]);
  });

  it('analyzes the jobs table once it changed more than it holds, and not again until it does', async () => {
    const { db } = await open('pg');
    const lastAnalyzed = async () =>
      (
        await db.query<{ at: string | null }>({
          text: "SELECT greatest(last_analyze, last_autoanalyze)::text AS at FROM pg_stat_user_tables WHERE relid = 'skiplock.jobs'::regclass",
          params: [],
        })
      )[0]!.at;
    expect(await refreshStatistics(db)).toBe(false);
    await enqueueBatch(
      db,
      Array.from({ length: 1000 }, () => ({ queue: 'q' })),
    );
    await enqueueBatch(
      db,
      Array.from({ length: 500 }, () => ({ queue: 'q' })),
    );
    // Counters reach pg_stat_user_tables within a second or so of the inserting transaction.
    await waitFor('the inserts to reach the statistics and refreshStatistics to analyze', () => refreshStatistics(db), {
      everyMs: 200,
    });
    expect(await lastAnalyzed()).not.toBeNull();
    expect(await refreshStatistics(db)).toBe(false);
  });
});
