import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { sendEvent } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';
import {
  eventWaiter,
  LEDGER_SQL,
  medianAndMax,
  runningJobsOf,
  stepRunHistory,
  stepWorkers,
  untilWorkersListen,
  type StepWorker,
} from './support/step-jobs';

const open = engineDatabases();
const workers = stepWorkers(join(tmpdir(), `skiplock-faults-events-${process.pid}.log`));
afterEach(workers.killAll);

const JOBS = 200;
const WORKERS = 2;
const CONCURRENCY = 16;
const LEASE_SECONDS = 2;
const WORK_MS = 150;
/** Each job's event is sent this long after the jobs were enqueued, at random; some twice. */
const SEND_WITHIN_MS = 4000;
const DUPLICATE_EVERY = 4;
const SENDERS = 3;

/** A job's plan: which of sleep and wait it does. */
function plan(i: number): { key?: string; sleepMs?: number; workMs: number } {
  const sleepMs = 200 + Math.floor(Math.random() * 1300);
  const key = `order-${i}`;
  // A fifth only sleep, a fifth only wait, the rest sleep then wait.
  if (i % 5 === 0) return { sleepMs, workMs: WORK_MS };
  if (i % 5 === 1) return { key, workMs: WORK_MS };
  return { key, sleepMs, workMs: WORK_MS };
}

describe('scenario 12: events sent while jobs sleep and wait, a worker killed mid-way', () => {
  it('wakes each wait once with one event, never resumes a sleep early, loses no job', async () => {
    const { db, url } = await open('pg', 4);
    await db.query({ text: LEDGER_SQL, params: [] });
    const plans = Array.from({ length: JOBS }, (_, i) => plan(i));

    let generation = 0;
    const startWorker = () => workers.start(url, `events-${++generation}`, CONCURRENCY);
    const live: StepWorker[] = await Promise.all(Array.from({ length: WORKERS }, startWorker));
    // The jobs come once the workers are up (a few seconds on 2 cores), so the sends meet jobs at every stage.
    await untilWorkersListen(db, WORKERS);

    await enqueueMany(
      db,
      jobs(JOBS, (i) => ({
        queue: 'events',
        type: eventWaiter.type,
        payload: plans[i]!,
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 20,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      })),
    );
    const started = Date.now();

    // Every key gets an event at a random moment (before its job waits, or while it waits); some get a second.
    const sends = plans.flatMap((job, i) => {
      if (job.key === undefined) return [];
      const atMs = Math.floor(Math.random() * SEND_WITHIN_MS);
      const first = { key: job.key, atMs, n: i };
      return i % DUPLICATE_EVERY === 0
        ? [first, { key: job.key, atMs: atMs + Math.floor(Math.random() * 1000), n: i + JOBS }]
        : [first];
    });
    sends.sort((a, b) => a.atMs - b.atMs);
    const answers: Array<{ key: string; woken: number; atMs: number }> = [];
    const sender = pgDb(url, { max: SENDERS });
    let next = 0;
    const sending = Array.from({ length: SENDERS }, async () => {
      while (next < sends.length) {
        const send = sends[next++]!;
        const wait = started + send.atMs - Date.now();
        if (wait > 0) await sleep(wait);
        const sent = await sendEvent(sender, { event: 'ping', key: send.key, payload: { n: send.n } });
        answers.push({ key: send.key, woken: sent.woken, atMs: Date.now() });
      }
    });

    // A worker killed mid-way, while it holds jobs (past their waits, at work), and replaced.
    let killedAt = 0;
    let orphans: string[] = [];
    await sleep(SEND_WITHIN_MS / 2);
    for (let tries = 0; killedAt === 0 && tries < 50; tries++) {
      for (const worker of live) {
        const held = await runningJobsOf(db, worker.workerId);
        if (held.length === 0) continue;
        await worker.kill();
        killedAt = Date.now();
        orphans = held;
        live.splice(live.indexOf(worker), 1, await startWorker());
        break;
      }
      if (killedAt === 0) await sleep(50);
    }

    await Promise.all(sending);
    const counts = await untilAllSucceeded(db, 45_000);
    const tookMs = Date.now() - started;
    await sender.close();

    // Runs past a wait, and what they were handed: one event per job, whatever runs after.
    const wokenTwice = await db.query<{ jobId: string }>({
      text: `SELECT job_id AS "jobId" FROM step_ledger WHERE mark = 'after-wait'
             GROUP BY job_id HAVING count(DISTINCT detail->>'sentAt') > 1`,
      params: [],
    });
    // A wait that timed out (null) although its event was sent: a wake-up lost.
    const missed = await db.query<{ jobId: string }>({
      text: `SELECT DISTINCT job_id AS "jobId" FROM step_ledger WHERE mark = 'after-wait' AND detail->>'sentAt' IS NULL`,
      params: [],
    });
    const resumedTwice = await db.query<{ jobId: string }>({
      text: 'SELECT job_id AS "jobId" FROM skiplock.job_events WHERE kind = \'resumed\' GROUP BY job_id HAVING count(*) > 1',
      params: [],
    });
    // The event a run was handed is the one the step recorded.
    const notRecorded = await db.query<{ jobId: string }>({
      text: `SELECT DISTINCT l.job_id AS "jobId" FROM step_ledger l
             LEFT JOIN skiplock.job_steps s ON s.job_id = l.job_id AND s.name = 'ping' AND s.done
             WHERE l.mark = 'after-wait' AND (s.result->>'sentAt') IS DISTINCT FROM (l.detail->>'sentAt')`,
      params: [],
    });
    // Every run that got past a sleep: when it was claimed, when it got there (the handler's clock and the
    // database's), the end the plan step recorded and the one the sleep step recorded, and whether the run
    // resumed from the sleep's park (else it reached the sleep once its end had passed, and went on at once).
    const past = await db.query<{
      jobId: string;
      startedMs: number;
      nowMs: number;
      notedMs: number;
      untilMs: number;
      recordedMs: number;
      resumed: boolean;
    }>({
      text: `SELECT l.job_id AS "jobId", extract(epoch FROM l.run_started_at)::float8 * 1000 AS "startedMs",
                    (l.detail->>'now')::float8 AS "nowMs", extract(epoch FROM l.at)::float8 * 1000 AS "notedMs",
                    (l.detail->>'until')::float8 AS "untilMs",
                    extract(epoch FROM (s.result->>'until')::timestamptz)::float8 * 1000 AS "recordedMs",
                    EXISTS (SELECT 1 FROM skiplock.job_events p
                            WHERE p.job_id = l.job_id AND p.kind = 'parked' AND p.detail->>'step' = 'nap'
                              AND p.at <= l.run_started_at) AS resumed
             FROM step_ledger l JOIN skiplock.job_steps s ON s.job_id = l.job_id AND s.name = 'nap'
             WHERE l.mark = 'after-sleep' ORDER BY l.at`,
      params: [],
    });
    // Early: a run past the sleep before its end, by either clock; a run resumed from the park that was claimed
    // before the end; or a sleep step that recorded another end than the plan's.
    const early = new Set(
      past
        .filter(
          (run) =>
            run.nowMs < run.untilMs ||
            run.notedMs < run.recordedMs ||
            (run.resumed && run.startedMs < run.recordedMs) ||
            run.recordedMs !== run.untilMs,
        )
        .map((run) => run.jobId),
    );
    // The resume delay: from a sleep's recorded end to the next claim of its job after the park (killed or not).
    const history = await stepRunHistory(db);
    const napParks = await db.query<{ jobId: string; parkedMs: number; untilMs: number }>({
      text: `SELECT job_id AS "jobId", extract(epoch FROM min(at))::float8 * 1000 AS "parkedMs",
                    extract(epoch FROM min((detail->>'until')::timestamptz))::float8 * 1000 AS "untilMs"
             FROM skiplock.job_events WHERE kind = 'parked' AND detail->>'step' = 'nap' GROUP BY job_id`,
      params: [],
    });
    const firstResumed = new Map<string, number>();
    for (const park of napParks) {
      const next = history.runs.find((run) => run.jobId === park.jobId && run.startMs >= park.parkedMs);
      if (next !== undefined) firstResumed.set(park.jobId, next.startMs - park.untilMs);
    }
    const delay = medianAndMax([...firstResumed.values()]);
    const parkedAtNap = new Set(napParks.map((park) => park.jobId));
    const neverParked = new Set(past.map((run) => run.jobId).filter((id) => !parkedAtNap.has(id))).size;
    const [steps] = await db.query<{ kept: number; woken: number; sleeps: number }>({
      text: `SELECT count(*) FILTER (WHERE kind = 'event' AND attempt IS NOT NULL)::integer AS kept,
                    count(*) FILTER (WHERE kind = 'event' AND attempt IS NULL)::integer AS woken,
                    count(*) FILTER (WHERE kind = 'sleep')::integer AS sleeps
             FROM skiplock.job_steps`,
      params: [],
    });
    const [events] = await db.query<{ resumed: number; parked: number }>({
      text: `SELECT count(*) FILTER (WHERE kind = 'resumed')::integer AS resumed,
                    count(*) FILTER (WHERE kind = 'parked')::integer AS parked
             FROM skiplock.job_events`,
      params: [],
    });
    const wokenBySends = answers.reduce((sum, answer) => sum + answer.woken, 0);
    const waiting = plans.filter((job) => job.key !== undefined).length;
    const sleeping = plans.filter((job) => job.sleepMs !== undefined).length;

    await recordScenario({
      scenario: 12,
      name: 'Events exactly once, sleeps never early',
      load:
        `${JOBS} jobs on ${WORKERS} Node workers × ${CONCURRENCY}: ${sleeping} sleep 200 to 1,500 ms (its end recorded by a \`do\` step first), ` +
        `${waiting} wait for an event of their own key (timeout 10 minutes); ${answers.length} events sent by ${SENDERS} senders over ${seconds(SEND_WITHIN_MS)}, every ${DUPLICATE_EVERY}th key twice`,
      faults: `events sent before and after the waits began, duplicates, 1 SIGKILL of a worker mid-way (${orphans.length} jobs orphaned)`,
      jobsLost: counts.total - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: wokenTwice.length + resumedTwice.length + notRecorded.length + missed.length + early.size,
      recovery: `all ${JOBS} done ${seconds(tookMs)} after the enqueue; a parked sleep's job claimed again a median ${Math.round(delay.median)} ms (max ${Math.round(delay.max)} ms) after its recorded end`,
      notes: [
        `limit violations here: jobs handed more than one event (${wokenTwice.length}), resumed twice (${resumedTwice.length}), handed an event other than the recorded one (${notRecorded.length}), waits that missed their event (${missed.length}), jobs with a run past a sleep before its recorded end (${early.size})`,
        `${answers.length} events sent: they woke ${wokenBySends} jobs parked in their wait (${events!.resumed} 'resumed' events, ${steps!.woken} waits recorded by a send); ${steps!.kept} jobs found their event kept when they reached the wait; ${answers.filter((answer) => answer.woken === 0).length} sends woke nobody (sent before the wait, or duplicates)`,
        `${events!.parked} parks; ${past.length} runs got past a sleep (${steps!.sleeps} sleeps), ${past.filter((run) => run.resumed).length} of them resumed from its park; ${neverParked} jobs never parked at their sleep (its end had passed when they reached it); runs in the history: ${history.runs.length}`,
      ],
    });

    expect(counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(wokenTwice).toEqual([]);
    expect(resumedTwice).toEqual([]);
    expect(notRecorded).toEqual([]);
    expect(missed).toEqual([]);
    expect([...early]).toEqual([]);
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(steps!.kept + steps!.woken).toBe(waiting);
    expect(wokenBySends).toBe(events!.resumed);
    expect(killedAt).toBeGreaterThan(0);
  });
});
