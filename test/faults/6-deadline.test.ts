import { describe, expect, it } from 'vitest';
import { demoJobs } from '../../src/drain/handlers/demo';
import { engineDatabases } from '../support/engine-db';
import { drain } from '../drain/support/drain';
import { jobStates, runHistory } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const RUNNING = 5;
const SLEEP_MS = 8000;
/** Running jobs are stopped 2 s before the end of this budget: after about 6 s of their 8. */
const BUDGET_SECONDS = 8;

describe('scenario 6: a drain whose budget ends while 5 jobs run', () => {
  it('aborts them, hands them back, and the next drain finishes them', async () => {
    const { db } = await open('pg');
    await enqueueMany(
      db,
      jobs(RUNNING, () => ({ queue: 'deadline', type: 'sleep', payload: { ms: SLEEP_MS } })),
    );

    const first = await drain(db, demoJobs, {
      concurrency: RUNNING,
      budgetSeconds: BUDGET_SECONDS,
      handBackDelaySeconds: 0,
    });
    const handedBackAt = Date.now();
    const between = await jobStates(db);
    const second = await drain(db, demoJobs, { concurrency: RUNNING, budgetSeconds: 30 });
    const finishedAfterMs = Date.now() - handedBackAt;
    const after = await jobStates(db);

    const history = await runHistory(db);
    const released = history.runs.filter((run) => run.endedBy === 'released').length;
    const progress = await db.query<{ attempts: number; result: { sleptMs: number } }>({
      text: 'SELECT attempts, result FROM skiplock.all_jobs',
      params: [],
    });
    await recordScenario({
      scenario: 6,
      name: 'Deadline: the drain budget ends while jobs run',
      load: `${RUNNING} sleep jobs of ${SLEEP_MS / 1000} s, saving progress every second, in a drain of ${BUDGET_SECONDS} s`,
      faults: `the drain's deadline while all ${RUNNING} run`,
      jobsLost: RUNNING - (after.succeeded ?? 0),
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `all ${RUNNING} finished by the next drain ${seconds(finishedAfterMs)} after the hand-back, from their saved progress`,
      notes: [
        `first drain: claimed ${first.claimed}, handed back ${first.handedBack}, succeeded ${first.succeeded}; between drains: ${JSON.stringify(between)}`,
        `second drain: claimed ${second.claimed}, succeeded ${second.succeeded}; attempts counted per job: ${progress.map((row) => row.attempts).join(', ')}`,
      ],
    });

    expect(first).toMatchObject({ claimed: RUNNING, handedBack: RUNNING, succeeded: 0 });
    expect(released).toBe(RUNNING);
    expect(between.running).toBeUndefined();
    expect(second).toMatchObject({ claimed: RUNNING, succeeded: RUNNING });
    expect(after).toEqual({ succeeded: RUNNING });
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});
