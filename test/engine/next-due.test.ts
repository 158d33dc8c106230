import { describe, expect, it } from 'vitest';
import { claimBatch, complete, enqueue, fail, setQueue } from '../../src/engine';
import { nextDueAt } from '../../src/engine/next-due';
import { definePeriodicJob, syncPeriodicJobs } from '../../src/drain/periodic';
import { createRegistry } from '../../src/drain/registry';
import type { Db } from '../../src/db/types';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const WEEK = 7 * 24 * 3600;

async function databaseNow(db: Db): Promise<number> {
  const [row] = await db.query<{ now: Date }>({ text: 'SELECT now() AS now', params: [] });
  return new Date(row!.now).getTime();
}

const startOfTomorrowUtc = (ms: number) => {
  const day = new Date(ms);
  return Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate() + 1);
};

/** What nextDueAt says for work due at `ms`: the history's midnight comes first when it is sooner. */
const dueOf = (ms: number) => Math.min(ms, startOfTomorrowUtc(Date.now()));
const nextDue = async (db: Db, retentionSeconds = WEEK) =>
  (await nextDueAt(db, { types: ['noop'], retentionSeconds })).getTime();

describe('nextDueAt: when a drain next has work', () => {
  it('an empty queue: the start of tomorrow, when the history gets its next partition', async () => {
    const { db } = await open('pg');
    const due = await nextDueAt(db, { types: ['noop'], retentionSeconds: WEEK });
    expect(due.getTime()).toBe(startOfTomorrowUtc(await databaseNow(db)));
  });

  it('a delayed job of a type the drain runs: its run time; of another type: not at all', async () => {
    const { db } = await open('pg');
    const runAt = new Date(Date.now() + 3_600_000);
    await enqueue(db, { queue: 'q', type: 'pulled-elsewhere', delaySeconds: 60 });
    expect(await nextDue(db)).toBe(startOfTomorrowUtc(await databaseNow(db)));

    await enqueue(db, { queue: 'q', type: 'noop', runAt });
    expect(await nextDue(db)).toBe(dueOf(runAt.getTime()));
  });

  it('a job ready now: a time already past', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'q', type: 'noop' });
    expect(await nextDue(db)).toBeLessThanOrEqual(await databaseNow(db));
  });

  it('a ready job of a queue at its rate limit: when the window next has room', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'rated', { concurrency: null, weight: 1, rateLimit: { count: 1, perSeconds: 600 } });
    await enqueue(db, { queue: 'rated', type: 'noop' });
    await enqueue(db, { queue: 'rated', type: 'noop' });
    const [started] = await claimBatch(db, { max: 5, workerId: 'w' });
    await complete(db, started!);
    expect(await nextDue(db)).toBe(dueOf(Date.parse(started!.startedAt!) + 600_000));
  });

  it('a running job of any type: when its lease runs out (it is reaped then); a retry: its backoff', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'q', type: 'pulled-elsewhere', leaseSeconds: 600 });
    const [running] = await claimBatch(db, { max: 1, workerId: 'w' });
    const leaseEnds = new Date(running!.leaseExpiresAt!).getTime();
    expect(await nextDue(db)).toBe(dueOf(leaseEnds));

    await enqueue(db, { queue: 'q', type: 'noop', maxAttempts: 3 });
    const [retried] = await claimBatch(db, { max: 1, workerId: 'w', types: ['noop'] });
    await fail(db, {
      id: retried!.id,
      leaseToken: retried!.leaseToken,
      error: { message: 'try again' },
      retryInSeconds: 30,
    });
    const due = await nextDue(db);
    expect(due).toBeGreaterThan(Math.min(Date.now() + 20_000, startOfTomorrowUtc(Date.now()) - 1));
    expect(due).toBeLessThan(leaseEnds);
  });

  it('a waiting job that expires, a dedup window, a periodic schedule, an event past the retention', async () => {
    const { db } = await open('pg');
    const inAnHour = new Date(Date.now() + 3_600_000);
    await enqueue(db, { queue: 'q', type: 'pulled-elsewhere', delaySeconds: 7200, expiresAt: inAnHour });
    expect(await nextDue(db)).toBe(dueOf(inAnHour.getTime()));

    const { db: second } = await open('pg');
    await enqueue(second, { queue: 'q', type: 'noop', dedupKey: 'k', dedupWindowSeconds: 600 });
    const [claimed] = await claimBatch(second, { max: 1, workerId: 'w' });
    await complete(second, claimed!);
    const dedupDue = await nextDue(second);
    expect(dedupDue).toBeGreaterThan(dueOf(Date.now() + 500_000) - 1);
    expect(dedupDue).toBeLessThan(Date.now() + 700_000);

    const { db: third } = await open('pg');
    await syncPeriodicJobs(
      third,
      createRegistry([], [definePeriodicJob({ name: 'every-minute', cron: '* * * * *', type: 'noop' })], {
        knownTypes: ['noop'],
      }),
    );
    const [schedule] = await third.query<{ next_run_at: Date }>({
      text: 'SELECT next_run_at FROM skiplock.schedules',
      params: [],
    });
    expect(await nextDue(third)).toBe(dueOf(new Date(schedule!.next_run_at).getTime()));

    const { db: fourth } = await open('pg');
    await enqueue(fourth, { queue: 'q', type: 'pulled-elsewhere', maxAttempts: 1 });
    const [failing] = await claimBatch(fourth, { max: 1, workerId: 'w' });
    await fail(fourth, { id: failing!.id, leaseToken: failing!.leaseToken, error: { message: 'for good' } });
    const [event] = await fourth.query<{ at: Date }>({ text: 'SELECT at FROM skiplock.job_events', params: [] });
    const eventAt = new Date(event!.at).getTime();
    // Past the retention, and read by the statistics' rollup: five minutes after the event's hour ends.
    const summedAt = Math.floor(eventAt / 3_600_000) * 3_600_000 + 65 * 60_000;
    expect(await nextDue(fourth, 60)).toBe(dueOf(Math.max(eventAt + 60_000, summedAt)));
    expect(await nextDue(fourth, 3 * 3600)).toBe(dueOf(eventAt + 3 * 3_600_000));
  });
});
