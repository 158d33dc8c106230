import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../src/drain/define-job';
import { noopJob } from '../../src/drain/handlers/demo';
import { enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from '../drain/support/drain';
import { jobStates, runHistory } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const MAX_ATTEMPTS = 3;
const BEHIND = 200;

/** Reads a field its payload never has: every attempt crashes with a TypeError. */
const report = defineJob(
  'report',
  z.object({ customer: z.unknown() }),
  ({ customer }) => ({ name: (customer as { profile: { name: string } }).profile.name }),
  { backoff: { baseSeconds: 0.2, maxSeconds: 0.5 } },
);

describe('scenario 7: poison input', () => {
  it('fails after max attempts with its error kept, and the queue behind it keeps moving', async () => {
    const { db } = await open('pg');
    // First in line: highest priority.
    const { job: poison } = await enqueue(db, {
      queue: 'mixed',
      type: 'report',
      payload: { customer: null },
      maxAttempts: MAX_ATTEMPTS,
      priority: 10,
    });
    const { job: malformed } = await enqueue(db, {
      queue: 'mixed',
      type: 'report',
      payload: 'not an object',
      priority: 10,
    });
    await enqueueMany(
      db,
      jobs(BEHIND, (i) => ({ queue: 'mixed', type: 'noop', payload: i })),
    );

    const started = Date.now();
    const deadline = started + 60_000;
    let states = await jobStates(db);
    for (
      ;
      (states.succeeded ?? 0) + (states.failed ?? 0) < BEHIND + 2 && Date.now() < deadline;
      states = await jobStates(db)
    ) {
      await drain(db, [report, noopJob], { budgetSeconds: 10 });
    }
    const settledMs = Date.now() - started;

    const [poisonAfter, malformedAfter] = [await jobById(db, poison.id), await jobById(db, malformed.id)];
    const [ahead] = await db.query<{ completedBefore: number }>({
      // Started, not finished: completions are group-committed, and full-jitter retries can
      // spend all three attempts before the first batch of completions commits.
      text: `SELECT count(*)::integer AS "completedBefore" FROM skiplock.finished_jobs
             WHERE state = 'succeeded' AND first_started_at < (SELECT max(at) FROM skiplock.job_events WHERE job_id = $1 AND kind = 'failed')`,
      params: [poison.id],
    });
    const history = await runHistory(db);
    await recordScenario({
      scenario: 7,
      name: 'Poison input',
      load: `a job whose handler crashes on every attempt (max ${MAX_ATTEMPTS}) and one with a malformed payload, both first in line, ahead of ${BEHIND} jobs`,
      faults: 'a TypeError thrown by the handler on every attempt; a payload its schema refuses',
      jobsLost: BEHIND - (states.succeeded ?? 0),
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `all settled in ${seconds(settledMs)}; ${ahead!.completedBefore} of the ${BEHIND} jobs behind started before the poison job's last attempt`,
      notes: [
        `poison job: ${poisonAfter.status} after ${poisonAfter.attempts} attempts, last error ${JSON.stringify(poisonAfter.lastError)}`,
        `malformed payload: ${malformedAfter.status} after ${malformedAfter.attempts} attempt(s), last error ${JSON.stringify(malformedAfter.lastError)}`,
      ],
    });

    expect(poisonAfter).toMatchObject({ status: 'failed', attempts: MAX_ATTEMPTS });
    expect(JSON.stringify(poisonAfter.lastError)).toContain('TypeError');
    expect(malformedAfter.status).toBe('failed');
    expect(malformedAfter.lastError).not.toBeNull();
    expect(states).toEqual({ succeeded: BEHIND, failed: 2 });
    expect(ahead!.completedBefore).toBeGreaterThan(0);
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});
