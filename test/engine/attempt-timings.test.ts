import { describe, expect, it } from 'vitest';
import {
  attemptTimings,
  completeMany,
  enqueueBatch,
  failMany,
  InvalidInputError,
  type TimingWindow,
} from '../../src/engine';
import { claimStartedAgo } from '../support/attempts';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/** low <= value < high: timings carry a loaded machine's jitter. */
function expectWithin(value: number, low: number, high: number): void {
  expect(value).toBeGreaterThanOrEqual(low);
  expect(value).toBeLessThan(high);
}

describe('attempt timings', () => {
  it('give per queue and tenant the p50 and p95 of the wait before each ended attempt and of its run, successes and failures alike', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 20 }, () => ({ queue: 'reports', tenant: 'acme' })),
    );
    await enqueueBatch(db, [{ queue: 'reports', tenant: 'globex' }]);
    await enqueueBatch(
      db,
      Array.from({ length: 4 }, () => ({ queue: 'emails', tenant: 'acme', backoffBaseSeconds: 3600 })),
    );

    // Claimed 2 s ago; each held by its worker for a tenth of a second per place in line before it started.
    const reports = await claimStartedAgo(db, 'reports', 2000);
    await completeMany(
      db,
      reports.map((job, index) => ({ id: job.id, leaseToken: job.leaseToken, heldMs: index * 100 })),
    );
    const emails = await claimStartedAgo(db, 'emails', 1000);
    await failMany(
      db,
      emails.map((job) => ({ id: job.id, leaseToken: job.leaseToken, error: { message: 'no' }, heldMs: 500 })),
    );

    const timings = await attemptTimings(db, '1h');
    expect(
      timings.map(({ queue, tenant, attempts, succeeded, failed }) => ({ queue, tenant, attempts, succeeded, failed })),
    ).toEqual([
      { queue: 'emails', tenant: 'acme', attempts: 4, succeeded: 0, failed: 4 },
      { queue: 'reports', tenant: 'acme', attempts: 20, succeeded: 20, failed: 0 },
      { queue: 'reports', tenant: 'globex', attempts: 1, succeeded: 1, failed: 0 },
    ]);
    const [emailTimes, acme] = timings;
    // Failed attempts: held 500 ms of the second since their claim, so they waited 500 ms and ran the other 500.
    expectWithin(emailTimes!.waitMs.p50, 500, 800);
    expectWithin(emailTimes!.runMs.p50, 450, 800);
    // acme's 20 reports (one per place in line, 0 to 1.9 s): the median waited about 1 s and ran about 1 s; the 95th waited 1.8 s.
    expectWithin(acme!.waitMs.p50, 900, 1300);
    expectWithin(acme!.waitMs.p95, 1800, 2200);
    expectWithin(acme!.runMs.p50, 900, 1400);
    expectWithin(acme!.runMs.p95, 1800, 2300);

    // A tenant-bound caller sees its own tenant's only; the longer windows hold the same attempts.
    expect((await attemptTimings(db, '24h', { tenant: 'globex' })).map((row) => row.tenant)).toEqual(['globex']);
    expect((await attemptTimings(db, '7d')).map((row) => row.attempts)).toEqual([4, 20, 1]);
  });

  it('leave out attempts that ended before the window, and refuse a window it does not know', async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, [{ queue: 'old' }]);
    const [job] = await claimStartedAgo(db, 'old', 10);
    await completeMany(db, [{ id: job!.id, leaseToken: job!.leaseToken }]);
    await db.query({
      text: `UPDATE skiplock.finished_jobs SET finished_at = finished_at - interval '2 hours'`,
      params: [],
    });

    expect(await attemptTimings(db, '1h')).toEqual([]);
    expect(await attemptTimings(db, '24h')).toHaveLength(1);
    await expect(attemptTimings(db, '30d' as TimingWindow)).rejects.toThrow(InvalidInputError);
  });
});
