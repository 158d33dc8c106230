import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { acknowledge, claimBatch, enqueueBatch, reapExpiredLeases } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

const JOBS = 2000;
const WORKERS = 8;

async function count(db: Db, text: string): Promise<number> {
  const [row] = await db.query<{ count: number }>({ text, params: [] });
  return row!.count;
}

describe('batch acknowledgement under contention (real connections)', () => {
  it(`${WORKERS} workers acknowledge ${JOBS} jobs in batches while leases lapse and are reaped: each job succeeds exactly once`, async () => {
    const { db: setup, url } = await open('pg', 2);
    for (let i = 0; i < JOBS; i += 1000) {
      await enqueueBatch(
        setup,
        Array.from({ length: 1000 }, (_, k) => ({ queue: 'work', payload: i + k, maxAttempts: 1000 })),
      );
    }
    const workers: Db[] = Array.from({ length: WORKERS }, () => pgDb(url, { max: 1 }));
    const reaper = pgDb(url, { max: 1 });
    const completedBy = new Map<string, number>();
    let staleReported = 0;
    let working = true;

    // Leases of one second, and a reaper taking back what lapses: some acknowledgements arrive stale.
    const reaping = (async () => {
      while (working) {
        await reapExpiredLeases(reaper);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    try {
      await Promise.all(
        workers.map(async (db, index) => {
          for (let round = 0; ; round++) {
            const jobs = await claimBatch(db, { max: 25, workerId: `w${index}`, leaseSeconds: 1 });
            if (jobs.length === 0) {
              if ((await count(db, 'SELECT count(*)::integer AS count FROM skiplock.jobs')) === 0) return;
              await new Promise((resolve) => setTimeout(resolve, 20));
              continue;
            }
            // Some batches sit past their lease; each batch completes most jobs, fails some for a retry, hands some back.
            if ((index + round) % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 1500));
            const leases = jobs.map(({ id, leaseToken }) => ({ id, leaseToken }));
            const result = await acknowledge(db, {
              complete: leases.filter((_, i) => i % 10 < 8),
              fail: leases
                .filter((_, i) => i % 10 === 8)
                .map((lease) => ({ ...lease, error: { retry: true }, retryInSeconds: 0 })),
              release: leases.filter((_, i) => i % 10 === 9),
            });
            expect(result.completed.length + result.failed.length + result.released.length + result.stale.length).toBe(
              jobs.length,
            );
            for (const id of result.completed) completedBy.set(id, (completedBy.get(id) ?? 0) + 1);
            staleReported += result.stale.length;
          }
        }),
      );
    } finally {
      working = false;
      await reaping;
      await Promise.all([...workers, reaper].map((db) => db.close()));
    }

    expect(completedBy.size).toBe(JOBS);
    expect([...completedBy.values()].every((times) => times === 1)).toBe(true);
    expect(
      await count(setup, "SELECT count(*)::integer AS count FROM skiplock.finished_jobs WHERE state = 'succeeded'"),
    ).toBe(JOBS);
    expect(staleReported).toBeGreaterThan(0);
  }, 120_000);
});
