import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Queryable } from '../../src/db/types';
import { demoJobs } from '../../src/drain/handlers/demo';
import { sleep } from '../../src/engine/sleep';
import { enqueueBatch, queueHealth, type QueueHealth } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain } from '../drain/support/drain';
import { drainUntilAllSucceeded, runHistory } from './support/history';
import { jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const BEFORE_MS = 8_000;
/** Scaled down from the minute to keep the suite short; dead rows pile up all the same. */
const HELD_MS = 20_000;
const BATCH = 50;
const DRAINS = 2;

async function completedSince(db: Queryable, sinceMs: number): Promise<number> {
  const [row] = await db.query<{ count: number }>({
    text: "SELECT count(*)::integer AS count FROM skiplock.finished_jobs WHERE state = 'succeeded' AND finished_at >= to_timestamp($1 / 1000.0)",
    params: [sinceMs],
  });
  return row!.count;
}

function deadJobRows(health: QueueHealth): number {
  return health.deadTuples.find((table) => table.table === 'jobs')?.deadTuples ?? 0;
}

describe('scenario 8: an idle transaction holding back vacuum while jobs flow', () => {
  it('keeps the queue working, and the health view names the transaction', { timeout: 120_000 }, async () => {
    const { db, url } = await open('pg', 3);
    let flowing = true;
    const producer = (async () => {
      while (flowing) {
        await enqueueBatch(
          db,
          jobs(BATCH, () => ({ queue: 'flow', type: 'noop' })),
        );
        await sleep(100);
      }
    })();
    const drains = Array.from({ length: DRAINS }, async (_, index) => {
      const own = pgDb(url, { max: 3 });
      while (flowing) await drain(own, demoJobs, { budgetSeconds: 10, workerId: `drain-${index}` });
      await own.close();
    });

    const beforeStart = Date.now();
    await sleep(BEFORE_MS);
    const beforeRate = (await completedSince(db, beforeStart)) / (BEFORE_MS / 1000);
    const healthBefore = await queueHealth(db);

    // A session that opened a transaction, read, and went idle without committing.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    const heldStart = Date.now();
    let healthDuring: QueueHealth;
    let holderPid: number;
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM skiplock.jobs');
      holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await sleep(HELD_MS);
      healthDuring = await queueHealth(db);
    } finally {
      await holder.end();
    }
    const heldRate = (await completedSince(db, heldStart)) / ((Date.now() - heldStart) / 1000);

    flowing = false;
    await producer;
    await Promise.all(drains);
    const releasedAt = Date.now();
    const counts = await drainUntilAllSucceeded(db, () => drain(db, demoJobs));
    const history = await runHistory(db);
    await recordScenario({
      scenario: 8,
      name: 'Held snapshot: vacuum held back while jobs flow',
      load: `${BATCH} no-op jobs enqueued every 100 ms, ${DRAINS} drains; ${seconds(BEFORE_MS)} before, ${seconds(HELD_MS)} held`,
      faults: `an idle REPEATABLE READ transaction held open for ${seconds(HELD_MS)} (the issue's minute, scaled down)`,
      jobsLost: counts.total - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `backlog cleared ${seconds(Date.now() - releasedAt)} after the producer stopped`,
      notes: [
        `throughput: ${beforeRate.toFixed(0)} jobs/s before, ${heldRate.toFixed(0)} jobs/s while the snapshot was held`,
        `health view during: oldest transaction ${healthDuring.oldestSnapshotSeconds?.toFixed(1)} s (pid ${healthDuring.oldestSnapshotPid}, the holder's ${holderPid}); dead tuples in jobs ${deadJobRows(healthBefore)} before, ${deadJobRows(healthDuring)} during; oldest waiting ${healthDuring.oldestWaitingSeconds?.toFixed(2) ?? '—'} s`,
        `${counts.succeeded} of ${counts.total} jobs succeeded`,
      ],
    });

    expect(heldRate).toBeGreaterThan(0);
    expect(healthDuring.oldestSnapshotPid).toBe(holderPid);
    expect(healthDuring.oldestSnapshotSeconds).toBeGreaterThanOrEqual(HELD_MS / 1000 - 1);
    expect(counts.succeeded).toBe(counts.total);
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});
