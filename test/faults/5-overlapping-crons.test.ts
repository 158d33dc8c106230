import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import { defineJob } from '../../src/drain/define-job';
import { demoJobs } from '../../src/drain/handlers/demo';
import { definePeriodicJob } from '../../src/drain/periodic';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { drain } from '../drain/support/drain';
import { drainUntilAllSucceeded, runHistory } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const FIRINGS = 8;
const DELIVERIES = 2;
const BACKLOG = 300;
/** Longer than the gap between firings, so each drain overlaps the next one. */
const DRAIN_BUDGET_SECONDS = 3;

const tick = defineJob('tick', z.unknown(), () => ({ ticked: true }));
const everySecond = definePeriodicJob({ name: 'every-second', cron: '* * * * * *', type: 'tick' });

describe('scenario 5: overlapping Cron Triggers and duplicate deliveries of one event', () => {
  it('runs nothing twice at once and enqueues each periodic tick once', async () => {
    const { db, url } = await open('pg', 2);
    await enqueueMany(
      db,
      jobs(BACKLOG, () => ({ queue: 'crons', type: 'sleep', payload: { ms: 40 } })),
    );
    const handlers = [...demoJobs, tick];

    const started = Date.now();
    const drains: Array<Promise<unknown>> = [];
    for (let firing = 0; firing < FIRINGS; firing++) {
      // The same scheduled event delivered twice, each delivery a drain of its own on its own connections.
      for (let delivery = 0; delivery < DELIVERIES; delivery++) {
        const own = pgDb(url, { max: 6 });
        const options = {
          schedules: [everySecond],
          budgetSeconds: DRAIN_BUDGET_SECONDS,
          workerId: `cron-${firing}-${delivery}`,
        };
        drains.push(drain(own, handlers, options).finally(() => own.close()));
      }
      await sleep(1000);
    }
    await Promise.all(drains);
    const firedForMs = Date.now() - started;
    // Stop the schedule, then run what the ticks left behind.
    await db.query({ text: 'UPDATE skiplock.schedules SET enabled = false', params: [] });
    const counts = await drainUntilAllSucceeded(db, () => drain(db, handlers));

    const history = await runHistory(db);
    const ticks = await db.query<{ runAt: string; jobs: number }>({
      text: 'SELECT run_at::text AS "runAt", count(*)::integer AS jobs FROM skiplock.all_jobs WHERE type = \'tick\' GROUP BY run_at ORDER BY run_at',
      params: [],
    });
    const ticksTwice = ticks.filter((row) => row.jobs > 1);
    await recordScenario({
      scenario: 5,
      name: 'Overlapping Cron Triggers and duplicate deliveries',
      load: `${BACKLOG} sleep jobs (40 ms) and a periodic job every second`,
      faults: `${FIRINGS} cron firings 1 s apart, each delivered ${DELIVERIES} times; every drain runs ${DRAIN_BUDGET_SECONDS} s, so up to ${DELIVERIES * DRAIN_BUDGET_SECONDS} drains overlap`,
      jobsLost: counts.total - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: ticksTwice.length,
      recovery: 'n/a (no outage)',
      notes: [
        `${ticks.length} periodic ticks enqueued over ${seconds(firedForMs)} of firings, ${ticksTwice.length} of them twice`,
        `${counts.succeeded} of ${counts.total} jobs succeeded`,
      ],
    });

    expect(ticksTwice).toEqual([]);
    expect(ticks.length).toBeGreaterThan(0);
    expect(ticks.length).toBeLessThanOrEqual(Math.ceil(firedForMs / 1000) + 1);
    expect(counts.succeeded).toBe(counts.total);
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});
