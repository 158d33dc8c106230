import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import {
  definePeriodicJob,
  enqueueDuePeriodicJobs,
  type PeriodicJob,
  syncPeriodicJobs,
} from '../../src/drain/periodic';
import { createRegistry } from '../../src/drain/registry';
import { engineDatabases } from '../support/engine-db';
import { drain, recordingLogger } from './support/drain';

const open = engineDatabases();

// Its next tick is far off, so a drain that lists schedules a moment after
// another advanced it never finds a second tick due: each test makes the one
// tick it counts due itself.
const yearly = definePeriodicJob({
  name: 'yearly-report',
  cron: '0 0 1 1 *',
  type: 'report',
  payload: { kind: 'yearly' },
});
const report = defineJob('report', z.object({ kind: z.string() }), ({ kind }) => ({ reported: kind }));

/** Schedules synced as a registry that defines none of their types would (no payload check). */
function untyped(...schedules: PeriodicJob[]) {
  return { schedules, definitionOf: () => undefined };
}

async function makeDue(db: Db, name: string, ago = '1 second'): Promise<void> {
  await db.query({
    text: 'UPDATE skiplock.schedules SET next_run_at = now() - $2::interval WHERE name = $1',
    params: [name, ago],
  });
}

async function jobsOfType(db: Db, type: string): Promise<number> {
  const [row] = await db.query<{ count: number }>({
    text: 'SELECT count(*)::integer AS count FROM skiplock.all_jobs WHERE type = $1',
    params: [type],
  });
  return row!.count;
}

describe('periodic jobs', () => {
  it('takes a job definition, whose payload it types; a type name checked against the definitions given, or one whose payload is checked at start', async () => {
    const typed = definePeriodicJob({
      name: 'typed-report',
      cron: '0 0 1 1 *',
      job: report,
      payload: { kind: 'typed' },
    });
    expect(typed).toMatchObject({ type: 'report', payload: { kind: 'typed' } });
    expect(typed).not.toHaveProperty('job');
    // @ts-expect-error -- kind is a string in the schema: this must not compile.
    definePeriodicJob({ name: 'typed-bad', cron: '0 0 1 1 *', job: report, payload: { kind: 1 } });
    const named = definePeriodicJob<[typeof report]>({
      name: 'named-report',
      cron: '0 0 1 1 *',
      type: 'report',
      payload: { kind: 'named' },
    });
    expect(named).toEqual({ name: 'named-report', cron: '0 0 1 1 *', type: 'report', payload: { kind: 'named' } });
    definePeriodicJob<[typeof report]>({
      name: 'named-bad',
      cron: '0 0 1 1 *',
      // @ts-expect-error -- no definition has the type repotr: this must not compile.
      type: 'repotr',
      payload: { kind: 'x' },
    });

    const { db } = await open('pg');
    const misfit = definePeriodicJob({ name: 'misfit', cron: '0 0 1 1 *', type: 'report', payload: { kind: 7 } });
    await expect(syncPeriodicJobs(db, createRegistry([report], [typed, misfit]))).rejects.toThrow(
      'periodic job "misfit" (report): payload.kind: ',
    );
    const [row] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::integer AS count FROM skiplock.schedules',
      params: [],
    });
    expect(row!.count).toBe(0);
    await syncPeriodicJobs(db, createRegistry([report], [typed]));
    const [synced] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::integer AS count FROM skiplock.schedules',
      params: [],
    });
    expect(synced!.count).toBe(1);
  });

  it('enqueues each tick once when two drains overlap, and runs the job', async () => {
    const { db, url } = await open('pg');
    const other = pgDb(url, { max: 6 });
    await syncPeriodicJobs(db, untyped(yearly));

    for (let tick = 1; tick <= 5; tick++) {
      await makeDue(db, yearly.name);
      const [a, b] = await Promise.all([
        drain(db, [report], { schedules: [yearly] }),
        drain(other, [report], { schedules: [yearly] }),
      ]);
      expect(a.periodicEnqueued + b.periodicEnqueued).toBe(1);
      expect(await jobsOfType(db, 'report')).toBe(tick);
    }
    await other.close();

    const rows = await db.query<{ state: string; result: unknown }>({
      text: "SELECT state, result FROM skiplock.all_jobs WHERE type = 'report'",
      params: [],
    });
    expect(rows).toHaveLength(5);
    expect(rows.every((row) => row.state === 'succeeded')).toBe(true);
    expect(rows[0]!.result).toEqual({ reported: 'yearly' });
  });

  it('enqueues a due tick once however many drains race for it', async () => {
    const { db, url } = await open('pg');
    const racers = Array.from({ length: 8 }, () => pgDb(url, { max: 1 }));
    await syncPeriodicJobs(db, untyped(yearly));
    await makeDue(db, yearly.name);

    const enqueued = await Promise.all(racers.map((racer) => enqueueDuePeriodicJobs(racer, recordingLogger())));
    await Promise.all(racers.map((racer) => racer.close()));

    expect(enqueued.reduce((sum, n) => sum + n, 0)).toBe(1);
    expect(await jobsOfType(db, 'report')).toBe(1);
  });

  it('does not replay the ticks it missed: one job, then the next future tick', async () => {
    const { db } = await open('pg');
    const everyMinute = definePeriodicJob({
      name: 'minutely',
      cron: '* * * * *',
      type: 'report',
      payload: { kind: 'm' },
    });
    await syncPeriodicJobs(db, untyped(everyMinute));
    await makeDue(db, everyMinute.name, '3 hours');

    expect(await enqueueDuePeriodicJobs(db, recordingLogger())).toBe(1);
    expect(await enqueueDuePeriodicJobs(db, recordingLogger())).toBe(0);
    const [schedule] = await db.query<{ ahead: boolean; recent: boolean }>({
      text: `SELECT next_run_at > now() AS ahead, last_run_at > now() - interval '4 hours' AS recent
             FROM skiplock.schedules WHERE name = 'minutely'`,
      params: [],
    });
    expect(schedule).toEqual({ ahead: true, recent: true });
  });

  it('keeps the next tick when the same schedule is synced again, and starts over when its expression changes', async () => {
    const { db } = await open('pg');
    const nextRunAt = async () =>
      (
        await db.query<{ next: string }>({
          text: "SELECT next_run_at::text AS next FROM skiplock.schedules WHERE name = 'daily'",
          params: [],
        })
      )[0]!.next;
    const daily = definePeriodicJob({ name: 'daily', cron: '0 3 * * *', type: 'report' });
    await syncPeriodicJobs(db, untyped(daily));
    await makeDue(db, 'daily', '5 minutes');
    const due = await nextRunAt();

    await syncPeriodicJobs(db, untyped(daily));
    expect(await nextRunAt()).toBe(due);

    await syncPeriodicJobs(db, untyped({ ...daily, cron: '0 4 * * *' }));
    expect(await nextRunAt()).not.toBe(due);
  });

  it('refuses a bad cron expression when it is defined', () => {
    expect(() => definePeriodicJob({ name: 'bad', cron: 'every tuesday', type: 'report' })).toThrow();
  });
});
