import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import {
  completeMany,
  dailyAttemptStats,
  enqueueBatch,
  failMany,
  InvalidInputError,
  maintainHistory,
  pruneEvents,
  rollUpAttemptStats,
} from '../../src/engine';
import { claimStartedAgo, endedDaysAgo } from '../support/attempts';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const DAY_MS = 86_400_000;

const utcDay = (msAgo: number) => new Date(Date.now() - msAgo).toISOString().slice(0, 10);

/** An estimate read from the log-scale histogram: within 9% of the exact figure (plus the timer's millisecond). */
function expectNear(estimate: number, exact: number): void {
  expect(Math.abs(estimate - exact)).toBeLessThanOrEqual(exact * 0.09 + 1);
}

/**
 * The exact percentile of the attempts' waits or runs, from the one
 * definition the rollup sums (skiplock.ended_attempts): what a histogram's
 * estimate must come within 9% of. Read from the attempts as they ended, so
 * the moments the test's own statements took are in both.
 */
async function exactPercentile(
  db: Db,
  measure: 'wait_ms' | 'run_ms',
  fraction: number,
  where: { queue?: string; daysAgo?: number } = {},
): Promise<number> {
  const [row] = await db.query<{ ms: number }>({
    text: `SELECT percentile_disc($1::float8) WITHIN GROUP (ORDER BY ${measure})::float8 AS ms
           FROM skiplock.ended_attempts('-infinity', 'infinity')
           WHERE ($2::text IS NULL OR queue = $2)
             AND ($3::int IS NULL OR (ended_at AT TIME ZONE 'UTC')::date = (now() AT TIME ZONE 'UTC')::date - $3::int)`,
    params: [fraction, where.queue ?? null, where.daysAgo ?? null],
  });
  return row!.ms;
}

async function countRows(db: Db, table: string): Promise<number> {
  const [row] = await db.query<{ n: number }>({ text: `SELECT count(*)::integer AS n FROM ${table}`, params: [] });
  return row!.n;
}

describe('daily attempt statistics', () => {
  it('sum the attempts of past days per queue and tenant, and outlive the jobs and events they were made from', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, () => ({ queue: 'reports', tenant: 'acme' })),
    );
    await enqueueBatch(
      db,
      Array.from({ length: 3 }, () => ({ queue: 'emails', tenant: 'globex', backoffBaseSeconds: 3600 })),
    );
    const reports = await claimStartedAgo(db, 'reports', 2000);
    // Each held a tenth of a second more than the one before: waits of 0 to 0.9 s, runs of 2 s down to 1.1 s.
    await completeMany(
      db,
      reports.map((job, index) => ({ id: job.id, leaseToken: job.leaseToken, heldMs: index * 100 })),
    );
    const emails = await claimStartedAgo(db, 'emails', 400);
    await failMany(
      db,
      emails.map((job) => ({ id: job.id, leaseToken: job.leaseToken, error: { message: 'no' } })),
    );
    await endedDaysAgo(db, 2);

    const exact = {
      reportsWait: [
        await exactPercentile(db, 'wait_ms', 0.5, { queue: 'reports' }),
        await exactPercentile(db, 'wait_ms', 0.95, { queue: 'reports' }),
      ],
      reportsRun: [
        await exactPercentile(db, 'run_ms', 0.5, { queue: 'reports' }),
        await exactPercentile(db, 'run_ms', 0.95, { queue: 'reports' }),
      ],
      emailsRun: await exactPercentile(db, 'run_ms', 0.5, { queue: 'emails' }),
    };
    // The waits are exact: the held times themselves.
    expect(exact.reportsWait).toEqual([400, 900]);

    // Not rolled up yet: read from the history as it is.
    const before = await dailyAttemptStats(db, 7);
    const rollup = await rollUpAttemptStats(db, { keepDays: 365 });
    expect(rollup.rowsWritten).toBe(2);
    expect(await countRows(db, 'skiplock.daily_attempt_stats')).toBe(2);

    const stats = await dailyAttemptStats(db, 7);
    expect(stats).toEqual(before);
    const twoDaysAgo = utcDay(2 * DAY_MS);
    expect(
      stats.daily.map(({ day, queue, tenant, attempts, succeeded, failed }) => ({
        day,
        queue,
        tenant,
        attempts,
        succeeded,
        failed,
      })),
    ).toEqual([
      { day: twoDaysAgo, queue: 'emails', tenant: 'globex', attempts: 3, succeeded: 0, failed: 3 },
      { day: twoDaysAgo, queue: 'reports', tenant: 'acme', attempts: 10, succeeded: 10, failed: 0 },
    ]);
    const reportsDay = stats.daily[1]!;
    // percentile_disc over the ten: the 5th smallest wait (400 ms) and the 10th (900 ms); runs (about 1.1 to 2 s) the other way round.
    expectNear(reportsDay.waitMs.p50, exact.reportsWait[0]!);
    expectNear(reportsDay.waitMs.p95, exact.reportsWait[1]!);
    expectNear(reportsDay.runMs.p50, exact.reportsRun[0]!);
    expectNear(reportsDay.runMs.p95, exact.reportsRun[1]!);
    expectNear(stats.daily[0]!.runMs.p50, exact.emailsRun);
    expect(stats.totals.map((row) => [row.queue, row.attempts])).toEqual([
      ['emails', 3],
      ['reports', 10],
    ]);

    // Pruned with a retention of a day: the jobs and events go, the figures stay.
    await maintainHistory(db, { retentionSeconds: 86_400 });
    await pruneEvents(db, { retentionSeconds: 86_400 });
    expect(await countRows(db, 'skiplock.all_jobs')).toBe(3); // the failed emails wait out their retry
    expect(await countRows(db, 'skiplock.finished_jobs')).toBe(0);
    expect(await countRows(db, 'skiplock.job_events')).toBe(0);
    expect(await dailyAttemptStats(db, 7)).toEqual(stats);

    // A window that ends before them leaves them out; a tenant-bound caller sees its own.
    expect(await dailyAttemptStats(db, 2)).toEqual({ daily: [], totals: [] });
    expect((await dailyAttemptStats(db, 7, { tenant: 'acme' })).totals.map((row) => row.tenant)).toEqual(['acme']);
  });

  it('sum days into a period by their histograms, and count attempts ended since the last rollup once', async () => {
    const { db } = await open('pg');
    for (const [daysAgo, ranMs] of [
      [3, 1000],
      [2, 4000],
      [1, 20_000],
    ] as const) {
      await enqueueBatch(
        db,
        Array.from({ length: 4 }, () => ({ queue: 'q' })),
      );
      await completeMany(db, await claimStartedAgo(db, 'q', ranMs));
      await endedDaysAgo(db, daysAgo);
    }
    await rollUpAttemptStats(db, { keepDays: 365 });
    // Today's: not rolled up (their hour has not ended), still counted.
    await enqueueBatch(
      db,
      Array.from({ length: 4 }, () => ({ queue: 'q' })),
    );
    await completeMany(db, await claimStartedAgo(db, 'q', 500));
    await rollUpAttemptStats(db, { keepDays: 365 });

    const stats = await dailyAttemptStats(db, 30);
    expect(stats.daily.map((row) => [row.day, row.attempts])).toEqual([
      [utcDay(0), 4],
      [utcDay(DAY_MS), 4],
      [utcDay(2 * DAY_MS), 4],
      [utcDay(3 * DAY_MS), 4],
    ]);
    // Runs of about 0.5, 1, 4 and 20 s, plus the moments the test's statements took.
    expectNear(stats.daily[0]!.runMs.p50, await exactPercentile(db, 'run_ms', 0.5, { daysAgo: 0 }));
    expectNear(stats.daily[1]!.runMs.p50, await exactPercentile(db, 'run_ms', 0.5, { daysAgo: 1 }));
    // Over the 16 attempts (4 of each): the median is the 8th, the 95th percentile the 16th.
    expect(stats.totals).toHaveLength(1);
    expect(stats.totals[0]!.attempts).toBe(16);
    expectNear(stats.totals[0]!.runMs.p50, await exactPercentile(db, 'run_ms', 0.5));
    expectNear(stats.totals[0]!.runMs.p95, await exactPercentile(db, 'run_ms', 0.95));
  });

  it('never prune an attempt the rollup has not summed, and drop daily rows past their own retention', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 2 }, () => ({ queue: 'q', maxAttempts: 1 })),
    );
    const [done, failed] = await claimStartedAgo(db, 'q', 10);
    await completeMany(db, [done!]);
    await failMany(db, [{ id: failed!.id, leaseToken: failed!.leaseToken, error: { message: 'for good' } }]);
    await endedDaysAgo(db, 3);
    // The rollup stands before them: a retention of nothing prunes none of them.
    await db.query({
      text: "UPDATE skiplock.attempt_stats_rollup SET rolled_through = now() - interval '4 days'",
      params: [],
    });
    expect(await maintainHistory(db, { retentionSeconds: 0 })).toMatchObject({ droppedDays: 0, deletedJobs: 0 });
    expect(await pruneEvents(db, { retentionSeconds: 0 })).toBe(0);

    await rollUpAttemptStats(db, { keepDays: 365 });
    const events = async () =>
      (
        await db.query<{ n: number }>({ text: 'SELECT count(*)::integer AS n FROM skiplock.job_events', params: [] })
      )[0]!.n;
    expect(await events()).toBe(1);
    expect(await maintainHistory(db, { retentionSeconds: 0 })).toMatchObject({ deletedJobs: 2 });
    // The failed attempt's event went with its job, so nothing is left to prune.
    expect(await events()).toBe(0);
    expect(await pruneEvents(db, { retentionSeconds: 0 })).toBe(0);
    expect((await dailyAttemptStats(db, 7)).totals).toMatchObject([
      { queue: 'q', attempts: 2, succeeded: 1, failed: 1 },
    ]);

    // Until the next hour is due, a rollup only reads where it stands.
    expect(await rollUpAttemptStats(db, { keepDays: 2 })).toMatchObject({ rowsWritten: 0, rowsDropped: 0 });
    // The next hour's rollup keeps two days: the row of three days ago goes.
    await db.query({
      text: "UPDATE skiplock.attempt_stats_rollup SET rolled_through = rolled_through - interval '1 hour'",
      params: [],
    });
    expect(await rollUpAttemptStats(db, { keepDays: 2 })).toMatchObject({ rowsDropped: 1 });
    expect(await dailyAttemptStats(db, 7)).toEqual({ daily: [], totals: [] });
  });

  it('roll up once when two callers run it at once, and refuse a period it cannot read', async () => {
    const { db } = await open('pg', 4);
    await enqueueBatch(
      db,
      Array.from({ length: 5 }, () => ({ queue: 'q' })),
    );
    await completeMany(db, await claimStartedAgo(db, 'q', 10));
    await endedDaysAgo(db, 1);
    const rollups = await Promise.all(Array.from({ length: 4 }, () => rollUpAttemptStats(db, { keepDays: 365 })));
    expect(rollups.reduce((sum, rollup) => sum + rollup.rowsWritten, 0)).toBe(1);
    expect((await dailyAttemptStats(db, 7)).totals[0]!.attempts).toBe(5);

    for (const days of [0, 1001, 1.5, Number.NaN]) {
      await expect(dailyAttemptStats(db, days)).rejects.toThrow(InvalidInputError);
    }
  });
});
