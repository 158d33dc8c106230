import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { claimBatch, enqueue, enqueueBatch, queueHealth, reapExpiredLeases } from '../../src/engine';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';

const open = engineDatabases();

describe.each(DRIVERS)('queue health over %s', (driver) => {
  it('reports the oldest waiting job, reaped leases, and the transaction that holds back vacuum', async () => {
    const { db, url } = await open(driver);
    const idle = await queueHealth(db);
    expect(idle).toMatchObject({ oldestWaitingSeconds: null, expiredLeasesReaped: 0, oldestSnapshotPid: null });
    expect(idle.deadTuples.map((table) => table.table)).toContain('jobs');

    await enqueue(db, { queue: 'old', tenant: 'acme', runAt: new Date(Date.now() - 120_000).toISOString() });
    await enqueue(db, { queue: 'other', tenant: 'globex' });
    const [lost] = await claimBatch(db, { max: 1, workerId: 'vanished', leaseSeconds: 60, types: ['other'] });
    await db.query({
      text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
      params: [lost!.id],
    });
    expect(await reapExpiredLeases(db)).toHaveLength(1);

    // A session that sits idle inside a transaction with a snapshot: what stops vacuum.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM skiplock.jobs');
      const { pid } = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!;

      const health = await queueHealth(db);
      expect(health.oldestWaitingSeconds).toBeGreaterThanOrEqual(119);
      expect(health.expiredLeasesReaped).toBe(1);
      expect(health.oldestSnapshotPid).toBe(pid);
      expect(health.oldestSnapshotSeconds).toBeGreaterThanOrEqual(0);
      // A tenant sees its own waits and reaped leases only.
      expect(await queueHealth(db, { tenant: 'globex' })).toMatchObject({ expiredLeasesReaped: 1 });
      const acme = await queueHealth(db, { tenant: 'acme' });
      expect(acme.expiredLeasesReaped).toBe(0);
      expect(acme.oldestWaitingSeconds).toBeGreaterThanOrEqual(119);
    } finally {
      await holder.end();
    }
    expect((await queueHealth(db)).oldestSnapshotPid).toBeNull();
  });
});

describe('the oldest snapshot', () => {
  it('is never of a negative age, even for a transaction that began after the reading one', async () => {
    const { url } = await open('pg');
    const reader = pgDb(url, { max: 1 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      const health = await reader.withTransaction(async (tx) => {
        // The reader's transaction, and so its now(), starts first.
        await tx.query({ text: 'SELECT now()', params: [] });
        await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await holder.query('SELECT count(*) FROM skiplock.jobs');
        return queueHealth(tx);
      });
      expect(health.oldestSnapshotPid).not.toBeNull();
      expect(health.oldestSnapshotSeconds).toBeGreaterThanOrEqual(0);
    } finally {
      await holder.end();
      await reader.close();
    }
  });
});

describe('dead tuples', () => {
  // 40 rows: below autovacuum's threshold (50 dead rows), so nothing removes them under the test.
  it('counts the dead row versions that updates leave in the jobs table', async () => {
    const { db, url } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 40 }, () => ({ queue: 'churn' })),
    );
    const writer = new pg.Client({ connectionString: url });
    await writer.connect();
    try {
      await writer.query("UPDATE skiplock.jobs SET priority = 1 WHERE queue = 'churn'");
      // Statistics reach pg_stat_user_tables when a backend flushes them; ask for it now.
      await writer.query('SELECT pg_stat_force_next_flush()');
    } finally {
      await writer.end();
    }
    const jobsTable = async () => (await queueHealth(db)).deadTuples.find((table) => table.table === 'jobs')!;
    const { deadTuples } = await waitFor('the 40 dead row versions to reach the statistics', async () => {
      const table = await jobsTable();
      return table.deadTuples >= 40 && table;
    });
    expect(deadTuples).toBeGreaterThanOrEqual(40);
  });
});
