import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type EnqueueInput, setQueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { claimStartRecord, noteClaimStarts } from './support/claim-starts';
import {
  DROP_EVERY_MS,
  DROP_STREAM_MS,
  dropAccounting,
  dropStream,
  type JudgedDrop,
  untilNoLiveJobs,
} from './support/drop-stream';
import { runHistory } from './support/history';
import { DRAINS, KEYED_TYPE, PULL_WORKERS, runKeyScenario, seeded, succeededTwice } from './support/keyed-ledger';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-queue-rate-${process.pid}.log`));

interface RatedQueue {
  queue: string;
  limit: number;
  periodSeconds: number;
  /** Windows' worth of jobs enqueued at once. */
  windows: number;
}

/** Two queues with a rate limit, each fed several windows' worth at once by three tenants. */
const RATED: RatedQueue[] = [
  { queue: 'qrate-fast', limit: 8, periodSeconds: 1, windows: 6 },
  { queue: 'qrate-slow', limit: 5, periodSeconds: 2, windows: 4 },
];
const TENANTS = ['acme', 'globex', 'initech'];
/** The 'drop' queues, fed a steady stream of the three tenants far above their rate once the throttled jobs are done. */
const DROPPING: Omit<RatedQueue, 'windows'>[] = [
  { queue: 'qdrop-fast', limit: 4, periodSeconds: 1 },
  { queue: 'qdrop-slow', limit: 5, periodSeconds: 2 },
];
/** Beside them, a queue without a limit, claimed by the same claims. */
const FREE_QUEUE = 'qrate-free';
const FREE_JOBS = 150;
const LEASE_SECONDS = 2;
const KILLS = 3;
/** One job in this many fails its first attempt. */
const FAIL_FIRST_ONE_IN = 10;

/** Per rated queue, sampled: its own record of its starts in the window ending now. */
const sampleSql = /* sql */ `
SELECT q.name AS queue, q.rate_limit AS limit,
       skiplock.window_starts(q.starts, q.rate_seconds, clock_timestamp()) AS "inWindow"
FROM skiplock.queues q WHERE q.rate_limit IS NOT NULL`;

/**
 * For every start in a rated queue, its starts (every tenant's) in the
 * window that ends with it, (t - period, t]; the starts themselves come back
 * only for a window above the limit, as evidence.
 */
const windowsSql = /* sql */ `
SELECT s.queue, q.rate_limit AS limit, extract(epoch FROM s.started_at)::float8 * 1000 AS "atMs",
       s.started_at::text AS at, s.attempt, s.tenant, w.starts,
       CASE WHEN w.starts > q.rate_limit THEN w.evidence END AS evidence
FROM claim_starts s JOIN skiplock.queues q ON q.name = s.queue AND q.rate_limit IS NOT NULL
CROSS JOIN LATERAL (
  SELECT count(*)::integer AS starts,
         json_agg(json_build_object('job', o.job_id, 'attempt', o.attempt, 'startedAt', o.started_at::text)
                  ORDER BY o.started_at) AS evidence
  FROM claim_starts o
  WHERE o.queue = s.queue AND o.started_at > s.started_at - make_interval(secs => q.rate_seconds)
    AND o.started_at <= s.started_at
) w
ORDER BY s.queue, s.started_at`;

/** Per 'drop' queue: its jobs, how many ended how, and the dropped ones as they must be. */
const outcomesSql = /* sql */ `
SELECT a.queue, count(*)::integer AS jobs,
       count(*) FILTER (WHERE a.state = 'succeeded')::integer AS succeeded,
       count(*) FILTER (WHERE a.state = 'cancelled')::integer AS cancelled,
       count(*) FILTER (WHERE a.state = 'cancelled' AND a.attempts = 0
                          AND a.last_error->>'name' = 'RateLimitedError'
                          AND a.last_error->>'message' = format('its queue %s was at its rate limit (%s starts in %s s)',
                                                                q.name, q.rate_limit, q.rate_seconds)
                          AND NOT EXISTS (SELECT 1 FROM claim_starts r WHERE r.job_id = a.id))::integer AS "droppedAsSaid"
FROM skiplock.all_jobs a JOIN skiplock.queues q ON q.name = a.queue
WHERE q.rate_mode = 'drop'
GROUP BY a.queue`;

/**
 * Each dropped job against its queue's window when it was dropped: its
 * enqueue judged the window after the queue's lock, at a time between its
 * statement's start (created_at) and the drop's own clock (finished_at), so
 * the window it saw held at most the queue's starts in (created_at - period,
 * finished_at] and the jobs let through before it not started by then. A
 * drop with fewer than the limit there dropped a job the window had room for.
 */
const dropsSql = /* sql */ `
SELECT c.id, c.queue, q.rate_limit AS limit,
       (SELECT count(*)::integer FROM claim_starts r
        WHERE r.queue = c.queue
          AND r.started_at > c.created_at - make_interval(secs => q.rate_seconds) AND r.started_at <= c.finished_at)
         AS "inWindow",
       (SELECT count(*)::integer FROM skiplock.all_jobs a
        WHERE a.queue = c.queue AND a.created_at < c.created_at AND a.state <> 'cancelled'
          AND NOT EXISTS (SELECT 1 FROM claim_starts r WHERE r.job_id = a.id AND r.started_at <= c.finished_at))
         AS "letThroughUnstarted"
FROM skiplock.finished_jobs c JOIN skiplock.queues q ON q.name = c.queue
WHERE c.state = 'cancelled' AND q.rate_mode = 'drop'`;

interface WindowRow {
  queue: string;
  limit: number;
  atMs: number;
  at: string;
  attempt: number;
  tenant: string;
  starts: number;
  evidence: unknown;
}

describe('scenario 19: queue rate limits under 8 drains and 8 pull workers, workers killed mid-job', () => {
  it('never starts more of a queue than its rate limit in any window, all tenants together, and runs every job once', {
    timeout: 120_000,
  }, async () => {
    const { db, url } = await open('pg', 4);
    await noteClaimStarts(db);
    for (const rated of RATED) {
      await setQueue(db, rated.queue, {
        concurrency: null,
        weight: 1,
        rateLimit: { count: rated.limit, perSeconds: rated.periodSeconds },
      });
    }
    for (const dropping of DROPPING) {
      await setQueue(db, dropping.queue, {
        concurrency: null,
        weight: 1,
        rateLimit: { count: dropping.limit, perSeconds: dropping.periodSeconds, onExcess: 'drop' },
      });
    }
    const random = seeded(19);
    const ratedInputs = RATED.flatMap((rated) =>
      Array.from({ length: rated.limit * rated.windows }, (_, n) => ({ queue: rated.queue, tenant: TENANTS[n % 3]! })),
    );
    const inputs: EnqueueInput[] = [
      ...ratedInputs,
      ...Array.from({ length: FREE_JOBS }, (_, n) => ({ queue: FREE_QUEUE, tenant: TENANTS[n % 3]! })),
    ]
      .map((job) => ({ job, order: random() }))
      .sort((a, b) => a.order - b.order)
      .map(({ job }, seq) => ({
        ...job,
        type: KEYED_TYPE,
        payload: { seq, workMs: Math.round(10 + random() * 140), failFirst: random() * FAIL_FIRST_ONE_IN < 1 },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      }));
    const failingFirst = inputs.filter((input) => (input.payload as { failFirst: boolean }).failFirst).length;

    let samplesAbove = 0;
    const sampledBusiest = new Map<string, number>();
    const run = await runKeyScenario(spawn, db, url, {
      inputs,
      kills: KILLS,
      async sample(sampler) {
        const rows = await sampler.query<{ queue: string; limit: number; inWindow: number }>({
          text: sampleSql,
          params: [],
        });
        for (const row of rows) {
          sampledBusiest.set(row.queue, Math.max(sampledBusiest.get(row.queue) ?? 0, row.inWindow));
          if (row.inWindow > row.limit) samplesAbove += 1;
        }
      },
      during: async () => undefined,
    });

    // The 'drop' queues, with the crew still claiming: a stream of the three tenants far above their rate.
    const dropStarted = Date.now();
    const drops = await dropStream(db, random, (n) =>
      DROPPING.map((dropping) => ({
        queue: dropping.queue,
        type: KEYED_TYPE,
        tenant: TENANTS[n % TENANTS.length]!,
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
      })),
    );
    const streamMs = Date.now() - dropStarted;
    const liveLeft = await untilNoLiveJobs(db, 30_000);
    const dropMs = Date.now() - dropStarted;

    const windows = await db.query<WindowRow>({ text: windowsSql, params: [] });
    const violations = windows.filter((row) => row.starts > row.limit);
    const perQueue = new Map(
      [...RATED, ...DROPPING].map((rated) => {
        const rows = windows.filter((row) => row.queue === rated.queue);
        const times = rows.map((row) => row.atMs);
        return [
          rated.queue,
          {
            starts: rows.length,
            retries: rows.filter((row) => row.attempt > 1).length,
            busiest: Math.max(0, ...rows.map((row) => row.starts)),
            spanSeconds: (Math.max(...times) - Math.min(...times)) / 1000,
            tenants: new Set(rows.map((row) => row.tenant)).size,
          },
        ];
      }),
    );
    const record = await claimStartRecord(db);
    const [free] = await db.query<{ starts: number; seconds: number }>({
      text: `SELECT count(*)::integer AS starts,
                    extract(epoch FROM max(started_at) - min(started_at))::float8 AS seconds
             FROM claim_starts WHERE queue = $1`,
      params: [FREE_QUEUE],
    });

    // The 'drop' queues' accounting: each job let through and succeeded, or dropped as the answer said, with cause.
    const outcomes = await db.query<{
      queue: string;
      jobs: number;
      succeeded: number;
      cancelled: number;
      droppedAsSaid: number;
    }>({ text: outcomesSql, params: [] });
    const outcomeOf = new Map(outcomes.map((row) => [row.queue, row]));
    const dropOutcomes = DROPPING.map((dropping) => outcomeOf.get(dropping.queue));
    const {
      jobs: dropJobs,
      cancelled: dropCancelled,
      succeeded: dropSucceeded,
      explained: dropsExplained,
      droppedWithRoom,
    } = await dropAccounting<JudgedDrop & { id: string; queue: string }>(db, dropOutcomes, dropsSql);
    const history = await runHistory(db);
    const twice = [...new Set([...run.twice, ...history.runTwiceAtOnce, ...(await succeededTwice(db))])];
    const lost = run.counts.total - run.counts.succeeded + (dropJobs - dropCancelled - dropSucceeded);

    /** A queue's starts, from the claims' record. */
    const startsOf = (rated: Omit<RatedQueue, 'windows'>) => {
      const figures = perQueue.get(rated.queue)!;
      const tightest = (Math.ceil(figures.starts / rated.limit) - 1) * rated.periodSeconds;
      return (
        `${figures.starts} starts of ${figures.tenants} tenants (${figures.retries} of them later attempts) over ` +
        `${figures.spanSeconds.toFixed(1)} s (the limit allows no less than ${tightest} s), busiest window ${figures.busiest}`
      );
    };
    const queueLine = RATED.map(
      (rated) =>
        `${rated.queue} ${rated.limit}/${rated.periodSeconds} s: ${startsOf(rated)}, sampled ${sampledBusiest.get(rated.queue) ?? 0}`,
    ).join('; ');
    const dropLine = DROPPING.map((dropping) => {
      const row = outcomeOf.get(dropping.queue);
      return `${dropping.queue} ${dropping.limit}/${dropping.periodSeconds} s: ${row?.jobs ?? 0} enqueued, ${row?.succeeded ?? 0} let through (all succeeded), ${row?.cancelled ?? 0} dropped, ${startsOf(dropping)}`;
    }).join('; ');
    await recordScenario({
      scenario: 19,
      name: 'Queue rate limits under contention',
      load:
        `${ratedInputs.length} jobs of ${RATED.length} queues with a rate limit (8 starts per 1 s, 5 per 2 s), ` +
        `${TENANTS.length} tenants each, 4 to 6 windows' worth enqueued at once, beside ${FREE_JOBS} jobs of a queue ` +
        `without one; work of 10 to 150 ms, ${failingFirst} failing their first attempt; ` +
        `then ${drops.enqueued} jobs of ${DROPPING.length} 'drop' queues (4 per 1 s, 5 per 2 s), one per queue every ${DROP_EVERY_MS} ms ` +
        `(${Math.round(streamMs / (drops.enqueued / DROPPING.length))} ms apart with the enqueues' own time) for ${seconds(DROP_STREAM_MS)}, the ${TENANTS.length} tenants in turn; ` +
        `${DRAINS} drain processes + ${PULL_WORKERS} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
      faults: `all 16 claimers at once; ${run.kills.length} SIGKILLs of workers mid-attempt (${run.cut} attempts cut, ${record.startsAfterLapse} claimed again after their lease lapsed), each replaced; ${run.samples} samples of each queue's window`,
      jobsLost: lost,
      runTwiceAtOnce: twice.length,
      limitViolations: violations.length + samplesAbove,
      recovery: `the ${run.counts.total} throttled and free jobs done ${seconds(run.tookMs)} after the enqueue, the drop stream settled ${seconds(dropMs)} after it began (each of the 16 first processes ran attempts: ${run.idle.length === 0 ? 'yes' : `not ${run.idle.join(', ')}`})`,
      notes: [
        `limit violations here: windows (period-long, ending at a start) with more starts of a queue, all tenants together, than its rate limit, from the start time each claim gave the job (a trigger noted every claim's start: ${record.starts} starts, every attempt of every job, the killed ones' included) (${violations.length}); samples of a queue's own window above its limit (${samplesAbove})`,
        `rated queues: ${queueLine}`,
        `drop queues: ${dropLine}; every dropped job cancelled with the RateLimitedError naming its queue, never started (${dropsExplained} of ${dropCancelled}), none dropped while its window had room (${droppedWithRoom.length}: the queue's starts in the period before the enqueue's start up to the drop's own clock, plus the jobs let through before it not started by then, at least the limit for every drop)`,
        `the queue without a limit, claimed by the same claims: ${free!.starts} starts over ${free!.seconds.toFixed(1)} s`,
      ],
    });

    // No window of a rated queue above its limit: the evidence (its starts) if one is.
    expect(
      violations.map(({ queue, limit, at, starts, evidence }) => ({ queue, limit, at, starts, evidence })),
    ).toEqual([]);
    expect(samplesAbove).toBe(0);
    // The run itself went as planned.
    expect(run.samplerError).toBeUndefined();
    expect(run.connected).toBe(DRAINS + PULL_WORKERS);
    expect(run.idle).toEqual([]);
    expect(run.kills.length).toBe(KILLS);
    expect(run.counts).toEqual({ total: inputs.length, succeeded: inputs.length });
    expect(liveLeft).toBe(0);
    expect(lost).toBe(0);
    expect(twice).toEqual([]);
    // The starts noted are the attempts; a kill's cut attempt was claimed again and counted.
    expect(record).toMatchObject({ attemptsMismatched: 0, notedTwice: 0 });
    expect(record.starts).toBe(inputs.length + dropSucceeded + record.laterAttempts);
    expect(run.cut).toBeGreaterThan(0);
    // Each rated queue reached its limit, was held to it window after window, and served every tenant.
    for (const rated of RATED) {
      const figures = perQueue.get(rated.queue)!;
      expect({ queue: rated.queue, busiest: figures.busiest }).toEqual({ queue: rated.queue, busiest: rated.limit });
      expect(figures.spanSeconds).toBeGreaterThanOrEqual(
        (Math.ceil(figures.starts / rated.limit) - 1) * rated.periodSeconds,
      );
      expect(figures.tenants).toBe(TENANTS.length);
    }
    // The 'drop' queues: each job either let through and succeeded, or dropped as the answer said, with cause.
    expect(dropJobs).toBe(drops.enqueued);
    expect(dropCancelled).toBe(drops.answeredCancelled);
    expect(dropsExplained).toBe(dropCancelled);
    expect(droppedWithRoom).toEqual([]);
    for (const [i, dropping] of DROPPING.entries()) {
      // Let through more than one window's worth, of every tenant, held to the limit, and dropped some.
      const figures = perQueue.get(dropping.queue)!;
      expect(dropOutcomes[i]!.succeeded).toBeGreaterThan(dropping.limit);
      expect(dropOutcomes[i]!.cancelled).toBeGreaterThan(0);
      expect({ queue: dropping.queue, busiest: figures.busiest }).toEqual({
        queue: dropping.queue,
        busiest: dropping.limit,
      });
      expect(figures.tenants).toBe(TENANTS.length);
    }
  });
});
