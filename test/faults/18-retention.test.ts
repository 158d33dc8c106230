import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { PermanentError } from '../../src/drain/job-errors';
import { createRegistry } from '../../src/drain/registry';
import { runUntilStopped } from '../../src/drain/run-until-stopped';
import { maintainHistory, pauseQueue, setQueue } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const WEEK = 7 * 24 * 3600;
const HOUR = 3600;
/** Finished jobs already in the history, per queue, finished over the last three hours. */
const SEEDED = 4000;
/** Jobs enqueued and run during the scenario, per queue, and of the `ping` type (retention "none"). */
const LIVE = 1500;
const DRAINS = 4;
/** Every this many jobs, one fails for good. */
const FAIL_EVERY = 7;

/**
 * The queues: `trivial` keeps no history of succeeded jobs, `hourly` keeps
 * its jobs an hour, `kept` the default week; `ping` jobs (in `kept`) keep no
 * history of their own (their type's "none" wins over the queue's week).
 */
const QUEUES = ['trivial', 'hourly', 'kept'] as const;

/** Seeded history: SEEDED jobs a queue, the nth finished n × 3 h / SEEDED ago, every FAIL_EVERY-th failed. */
const seedSql = /* sql */ `
INSERT INTO skiplock.finished_jobs (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts,
  lease_seconds, backoff_base_seconds, backoff_max_seconds, dedup_window_seconds, created_at, started_at,
  payload, finished_at)
SELECT gen_random_uuid(), q.queue, 'seed', 'default', CASE WHEN n % ${FAIL_EVERY} = 0 THEN 'failed' ELSE 'succeeded' END,
       0, at, 1, 1, 30, 1, 60, 0, at, at, 'null', at
FROM unnest($1::text[]) AS q(queue)
CROSS JOIN generate_series(1, $2::integer) AS n
CROSS JOIN LATERAL (SELECT now() - make_interval(secs => n * 3 * 3600.0 / $2)) AS t(at)`;

/** Each job, what its retention asks of it now, and whether the history still has it. */
const verdictSql = /* sql */ `
SELECT e.queue, e.type, e.state, coalesce(e.finished_at < now() - interval '1 hour', false) AS "pastAnHour",
       coalesce(e.finished_at < now() - interval '61 minutes', false) AS "wellPastAnHour",
       EXISTS (SELECT 1 FROM skiplock.finished_jobs f WHERE f.id = e.id) AS kept,
       EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = e.id AND j.queue <> 'bounced-dead') AS live,
       EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = e.id AND j.queue = 'bounced-dead' AND j.state = 'queued')
         AS "deadLettered",
       (SELECT count(*) FROM skiplock.job_events v
        WHERE v.job_id = e.id AND v.kind = 'retried' AND v.detail ? 'deadLetter')::integer AS moves,
       EXISTS (SELECT 1 FROM ran r WHERE r.job_id = e.id) OR e.type = 'seed' AS ran
FROM expected e`;

interface Verdict {
  queue: string;
  type: string;
  state: string;
  pastAnHour: boolean;
  wellPastAnHour: boolean;
  kept: boolean;
  live: boolean;
  /** Waiting in the dead-letter queue of `bounced` (paused, so they stay). */
  deadLettered: boolean;
  moves: number;
  ran: boolean;
}

/**
 * Whether the job is past its retention (its statistics summed): a succeeded job of "none" at once, an
 * `hourly` one once `anHourPassed`. Asked with the hour just passed (it may be gone) and with a minute
 * more (it must be gone: the sweeps ran since).
 */
function pastRetention(job: Verdict, anHourPassed: boolean): boolean {
  if (job.state === 'succeeded' && (job.queue === 'trivial' || job.type === 'ping')) return true;
  return job.queue === 'hourly' && anHourPassed;
}

async function count(db: Queryable, text: string): Promise<number> {
  return (await db.query<{ n: number }>({ text: `SELECT (${text})::integer AS n`, params: [] }))[0]!.n;
}

describe('scenario 18: retention sweeps and dead letters during a busy drain', () => {
  it('never prunes a live job or one inside its retention, prunes the rest, and moves each failure to its dead-letter queue once', {
    timeout: 120_000,
  }, async () => {
    const { db, url } = await open('pg', 4);
    await db.query({ text: 'CREATE TABLE ran (job_id uuid NOT NULL)', params: [] });
    await db.query({
      text: 'CREATE TABLE expected (id uuid PRIMARY KEY, queue text, type text, state text, finished_at timestamptz)',
      params: [],
    });
    await setQueue(db, 'trivial', { concurrency: null, weight: 1, retentionSeconds: 'none' });
    await setQueue(db, 'hourly', { concurrency: null, weight: 1, retentionSeconds: HOUR });
    // The failures of `bounced` move to its dead-letter queue, paused so they wait there to be counted.
    await setQueue(db, 'bounced', { concurrency: null, weight: 1, deadLetterQueue: 'bounced-dead' });
    await pauseQueue(db, 'bounced-dead');
    await db.query({ text: seedSql, params: [QUEUES, SEEDED] });
    await db.query({
      text: 'INSERT INTO expected SELECT id, queue, type, state, finished_at FROM skiplock.finished_jobs',
      params: [],
    });
    // Everything finished until now is summed by the statistics, as far as pruning knows.
    const rollUp = (lagSeconds = 1) =>
      db.query({
        text: 'UPDATE skiplock.attempt_stats_rollup SET rolled_through = now() - make_interval(secs => $1::float8)',
        params: [lagSeconds],
      });
    await rollUp();

    const ledger = pgDb(url, { max: 2 });
    const run = async (payload: { n: number }, ctx: { job: { id: string } }) => {
      await ledger.query({ text: 'INSERT INTO ran (job_id) VALUES ($1)', params: [ctx.job.id] });
      if (payload.n % FAIL_EVERY === 0) throw new PermanentError('fails for good, as planned');
      return { n: payload.n };
    };
    const registry = createRegistry([
      defineJob('work', z.object({ n: z.int() }), run),
      defineJob('ping', z.object({ n: z.int() }), run, { retentionSeconds: 'none' }),
    ]);
    const live = [
      ...[...QUEUES, 'bounced'].flatMap((queue) =>
        jobs(LIVE, (n) => ({ queue, type: 'work', payload: { n }, maxAttempts: 1 })),
      ),
      ...jobs(LIVE, (n) => ({ queue: 'kept', type: 'ping', payload: { n }, maxAttempts: 1 })),
    ];
    await enqueueMany(db, live);
    await db.query({
      text: `INSERT INTO expected
             SELECT id, queue, type, CASE WHEN (payload->>'n')::integer % ${FAIL_EVERY} = 0 THEN 'failed' ELSE 'succeeded' END
             FROM skiplock.jobs`,
      params: [],
    });

    const started = Date.now();
    const pools: Db[] = Array.from({ length: DRAINS }, () => pgDb(url, { max: 3 }));
    const drains = await Promise.all(
      pools.map((pool, i) =>
        runUntilStopped(pool, registry, {
          workerId: `retention-drain-${i}`,
          concurrency: 8,
          waitForWork: (signal) => sleep(20, signal),
          // Every drain sweeps as often as it can: the sweeps meet one another and the completions.
          housekeepingIntervalMs: 20,
          retentionSeconds: WEEK,
          logger: { info() {}, warn() {}, error: console.error },
        }),
      ),
    );
    // The statistics' horizon moves on as the jobs finish, so the live jobs of "none" are swept while others complete.
    let rolling = true;
    const roller = (async () => {
      while (rolling) {
        await rollUp();
        await sleep(200);
      }
    })();
    let sweptWhileDraining = 0;
    try {
      await waitFor(
        'every live job to finish',
        async () => {
          const waiting = await count(db, "SELECT count(*) FROM skiplock.jobs WHERE queue <> 'bounced-dead'");
          if (waiting > 0) {
            sweptWhileDraining = await count(
              db,
              `SELECT ${QUEUES.length * SEEDED} + ${live.length} - (SELECT count(*) FROM skiplock.all_jobs) - ${waiting}`,
            );
          }
          return waiting === 0;
        },
        { timeoutMs: 90_000, everyMs: 100 },
      );
    } finally {
      rolling = false;
      await roller;
      await Promise.all(drains.map((drain) => drain.stop(1000)));
      await Promise.all(pools.map((pool) => pool.close()));
      await ledger.close();
    }
    const tookMs = Date.now() - started;

    // The last sweeps, until one finds nothing more, with every finished job summed (none is finishing now).
    await rollUp(0);
    let finalRounds = 0;
    while ((await maintainHistory(db, { retentionSeconds: WEEK })).deletedJobs > 0) finalRounds++;

    const ranTwice = await count(
      db,
      'SELECT count(*) FROM (SELECT job_id FROM ran GROUP BY job_id HAVING count(*) > 1) t',
    );
    const verdicts = await db.query<Verdict>({ text: verdictSql, params: [] });
    // Lost: a live job that never ran or never finished, or any job gone inside its retention.
    const neverRan = verdicts.filter((job) => !job.ran || job.live).length;
    // Each failure of `bounced` waits in its dead-letter queue, moved once; nothing else moved.
    const bounced = verdicts.filter((job) => job.queue === 'bounced');
    const notMoved = bounced.filter((job) => job.state === 'failed' && !(job.deadLettered && job.moves === 1)).length;
    const movedWrongly = verdicts.filter(
      (job) => job.moves > 0 && !(job.queue === 'bounced' && job.state === 'failed'),
    ).length;
    const prunedTooSoon = verdicts.filter(
      (job) => !job.kept && !job.live && !job.deadLettered && !pastRetention(job, job.pastAnHour),
    ).length;
    const leftBehind = verdicts.filter((job) => job.kept && pastRetention(job, job.wellPastAnHour)).length;
    const pruned = verdicts.filter((job) => !job.kept && !job.live && !job.deadLettered).length;

    await recordScenario({
      scenario: 18,
      name: 'Retention sweeps and dead letters during a busy drain',
      load:
        `a history of ${QUEUES.length} × ${SEEDED} finished jobs over 3 h (queues: "none", 1 h, the 7-day default); ` +
        `${live.length} jobs run by ${DRAINS} drain loops × 8 (1 in ${FAIL_EVERY} fails for good; ${LIVE} of a type whose ` +
        `retention is "none", ${LIVE} in a queue with a dead-letter queue)`,
      faults:
        "every drain's housekeeping sweeping every 20 ms while the drains complete into the same day's partition; " +
        "the statistics' horizon moved every 200 ms, so jobs become prunable as they finish",
      jobsLost: neverRan + prunedTooSoon + notMoved,
      runTwiceAtOnce: ranTwice,
      limitViolations: leftBehind + movedWrongly,
      recovery: `all ${live.length} live jobs finished ${seconds(tookMs)} after the drains started`,
      notes: [
        `${pruned} of ${verdicts.length} jobs pruned (${sweptWhileDraining} while the drains ran), then ${finalRounds} more rounds until a sweep found nothing`,
        `${bounced.filter((job) => job.deadLettered).length} failures of a queue with a dead-letter queue waiting there, each moved once`,
        `lost here: live jobs that never ran or never finished (${neverRan}), jobs pruned inside their retention (${prunedTooSoon}), ` +
          `failures not in the dead-letter queue once (${notMoved})`,
        `limit violations here: jobs past their retention left behind once the sweeps found nothing more (${leftBehind}), ` +
          `jobs moved that should not have (${movedWrongly}); ` +
          'ran twice: jobs the handlers recorded twice',
      ],
    });
    expect({ neverRan, prunedTooSoon, leftBehind, ranTwice, notMoved, movedWrongly }).toEqual({
      notMoved: 0,
      movedWrongly: 0,
      neverRan: 0,
      prunedTooSoon: 0,
      leftBehind: 0,
      ranTwice: 0,
    });
  });
});
