import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EnqueueInput } from '../../src/engine';
import { pgDb } from '../../src/db/pg';
import { sleep } from '../../src/engine/sleep';
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
import { DRAINS, KEYED_TYPE, PULL_WORKERS, runKeyScenario, seeded } from './support/keyed-ledger';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-rate-keys-${process.pid}.log`));

interface RateKey {
  tenant: string;
  key: string;
  limit: number;
  periodSeconds: number;
}

/**
 * The throttled keys: the same key names in both tenants, with other
 * limits. Each gets its limit's worth of jobs six times over (a 1 s
 * window) or four times (2 s), all enqueued at once, so every key waits,
 * held, window after window.
 */
const THROTTLED: RateKey[] = [
  { tenant: 'acme', key: 'api-1', limit: 3, periodSeconds: 1 },
  { tenant: 'acme', key: 'api-2', limit: 5, periodSeconds: 1 },
  { tenant: 'acme', key: 'api-3', limit: 10, periodSeconds: 2 },
  { tenant: 'acme', key: 'api-4', limit: 4, periodSeconds: 2 },
  { tenant: 'globex', key: 'api-1', limit: 6, periodSeconds: 2 },
  { tenant: 'globex', key: 'api-2', limit: 10, periodSeconds: 1 },
  { tenant: 'globex', key: 'api-3', limit: 3, periodSeconds: 2 },
  { tenant: 'globex', key: 'api-4', limit: 7, periodSeconds: 1 },
];
const windowsOf = (key: RateKey) => (key.periodSeconds === 1 ? 6 : 4);
/** The 'drop' keys, fed a steady stream far above their rate once the throttled jobs are done. */
const DROPPING: RateKey[] = [
  { tenant: 'acme', key: 'ping', limit: 4, periodSeconds: 1 },
  { tenant: 'globex', key: 'ping', limit: 5, periodSeconds: 2 },
];
/**
 * A key whose jobs run longer than its window, each failing its first
 * attempt: a started job holds nothing of its key, so the key's row goes
 * while they run, and the claims of their retries make it again.
 */
const SLOW_KEY: RateKey = { tenant: 'acme', key: 'slow', limit: 3, periodSeconds: 1 };
const SLOW_JOBS = 3;
const SLOW_WORK_MS = 2500;
const SLOW_LEASE_SECONDS = 10;
const LEASE_SECONDS = 2;
const KILLS = 3;
/** One job in this many fails its first attempt. */
const FAIL_FIRST_ONE_IN = 12;

const keyName = (key: { tenant: string; key: string }) => `${key.tenant}/${key.key}`;

/**
 * A key whose row another transaction holds for a while, as a user's open
 * transaction holds it after enqueueing a job of it. Its limit never binds,
 * so its jobs wait queued, claimable, from the enqueue on: the claims pass
 * over them while the row is held and go on with the other keys' jobs,
 * rather than wait for it.
 */
const HELD_KEY: RateKey = { tenant: 'globex', key: 'open', limit: 10_000, periodSeconds: 1 };
const HELD_KEY_JOBS = 60;
const HOLD_MS = 2500;

/** Claims waiting now for the transaction with backend pid $1 (the holder's): none should. */
const claimsWaitingSql = /* sql */ `
SELECT count(*)::integer AS waiting FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE '%claim_batch%' AND $1::integer = ANY (pg_blocking_pids(pid))`;

interface Hold {
  /** The hold's span by the database's clock. */
  from: string;
  until: string;
  /** Samples of the claims waiting for the holder, taken meanwhile on a connection of their own. */
  samples: number;
  mostClaimsWaiting: number;
}

/** The key's row locked in a transaction of its own for HOLD_MS from now, the claims waiting for it sampled meanwhile. */
async function holdKeyRow(url: string): Promise<Hold> {
  const holder = pgDb(url, { max: 1 });
  const watcher = pgDb(url, { max: 1 });
  try {
    return await holder.withTransaction(async (tx) => {
      const [locked] = await tx.query<{ from: string; pid: number }>({
        text: `SELECT clock_timestamp()::text AS "from", pg_backend_pid() AS pid FROM skiplock.concurrency_keys
               WHERE tenant = $1 AND key = $2 FOR UPDATE`,
        params: [HELD_KEY.tenant, HELD_KEY.key],
      });
      if (locked === undefined) throw new Error(`no row for ${keyName(HELD_KEY)} to hold`);
      let samples = 0;
      let mostClaimsWaiting = 0;
      for (const end = Date.now() + HOLD_MS; Date.now() < end; samples++) {
        const [row] = await watcher.query<{ waiting: number }>({ text: claimsWaitingSql, params: [locked.pid] });
        mostClaimsWaiting = Math.max(mostClaimsWaiting, row!.waiting);
        await sleep(20);
      }
      const [ended] = await tx.query<{ until: string }>({
        text: 'SELECT clock_timestamp()::text AS until',
        params: [],
      });
      return { from: locked.from, until: ended!.until, samples, mostClaimsWaiting };
    });
  } finally {
    await Promise.all([holder.close(), watcher.close()]);
  }
}

/**
 * Starts noted while the key's row was held: of that key (none can be
 * counted without its lock) and of the others; and the key's jobs not yet
 * started when the hold began (what the claims had to pass over).
 */
const startsDuringHoldSql = /* sql */ `
SELECT count(*) FILTER (WHERE kj.tenant = $3 AND kj.key = $4 AND r.started_at > $1::timestamptz
                          AND r.started_at < $2::timestamptz)::integer AS "heldKey",
       count(*) FILTER (WHERE NOT (kj.tenant = $3 AND kj.key = $4) AND r.started_at > $1::timestamptz
                          AND r.started_at < $2::timestamptz)::integer AS "otherKeys",
       (SELECT count(*)::integer FROM skiplock.keyed_jobs k
        WHERE k.tenant = $3 AND k.key = $4
          AND NOT EXISTS (SELECT 1 FROM claim_starts c WHERE c.job_id = k.job_id AND c.started_at <= $1::timestamptz))
         AS "heldKeyWaiting"
FROM claim_starts r JOIN skiplock.keyed_jobs kj ON kj.job_id = r.job_id`;

/** The slow key: whether its row is there, and its jobs running now. */
const slowKeySql = /* sql */ `
SELECT EXISTS (SELECT 1 FROM skiplock.concurrency_keys c WHERE c.tenant = $1 AND c.key = $2) AS present,
       (SELECT count(*)::integer FROM skiplock.keyed_jobs kj JOIN skiplock.jobs j ON j.id = kj.job_id
        WHERE kj.tenant = $1 AND kj.key = $2 AND j.state = 'running') AS running`;

/** Per rate key, sampled: its own record of its starts in the window ending now, and its jobs held. */
const sampleSql = /* sql */ `
SELECT c.tenant, c.key, c.rate_limit AS limit,
       skiplock.window_starts(c.starts, c.rate_seconds, clock_timestamp()) AS "inWindow",
       (SELECT count(*)::integer FROM skiplock.keyed_jobs kj JOIN skiplock.jobs j ON j.id = kj.job_id
        WHERE kj.tenant = c.tenant AND kj.key = c.key AND j.state = 'held') AS held
FROM skiplock.concurrency_keys c WHERE c.rate_limit IS NOT NULL`;

/**
 * For every start of a rate key, the starts of that key in the window that
 * ends with it, (t - period, t]: the guarantee says at most the limit. The
 * starts themselves come back only for a window above it, as evidence.
 */
const windowsSql = /* sql */ `
WITH s AS (
  SELECT r.job_id, r.attempt, r.worker_id, r.started_at, kj.tenant, kj.key, kj.rate_limit, kj.rate_seconds
  FROM claim_starts r JOIN skiplock.keyed_jobs kj ON kj.job_id = r.job_id
  WHERE kj.rate_limit IS NOT NULL
)
SELECT s.tenant, s.key, s.rate_limit AS limit, s.rate_seconds AS "periodSeconds",
       extract(epoch FROM s.started_at)::float8 * 1000 AS "atMs", s.started_at::text AS at, s.attempt, w.starts,
       CASE WHEN w.starts > s.rate_limit THEN w.evidence END AS evidence
FROM s CROSS JOIN LATERAL (
  SELECT count(*)::integer AS starts,
         json_agg(json_build_object('job', o.job_id, 'attempt', o.attempt, 'worker', o.worker_id,
                                    'startedAt', o.started_at::text) ORDER BY o.started_at, o.job_id) AS evidence
  FROM s o
  WHERE o.tenant = s.tenant AND o.key = s.key
    AND o.started_at > s.started_at - make_interval(secs => s.rate_seconds) AND o.started_at <= s.started_at
) w
ORDER BY s.tenant, s.key, s.started_at`;

interface WindowRow {
  tenant: string;
  key: string;
  limit: number;
  periodSeconds: number;
  atMs: number;
  at: string;
  attempt: number;
  starts: number;
  evidence: unknown;
}

/** Per key: its jobs, how many ended how, the dropped ones as they must be, those let through yet held, and its holds. */
const outcomesSql = /* sql */ `
SELECT kj.tenant, kj.key, count(*)::integer AS jobs,
       count(*) FILTER (WHERE a.state = 'succeeded')::integer AS succeeded,
       count(*) FILTER (WHERE a.state = 'cancelled')::integer AS cancelled,
       count(*) FILTER (WHERE a.state = 'cancelled' AND a.attempts = 0
                          AND a.last_error->>'name' = 'RateLimitedError'
                          AND NOT EXISTS (SELECT 1 FROM claim_starts r WHERE r.job_id = a.id))::integer AS "droppedAsSaid",
       count(*) FILTER (WHERE a.state = 'succeeded' AND EXISTS (SELECT 1 FROM skiplock.job_events e
                                      WHERE e.job_id = a.id AND e.kind = 'held'))::integer AS "succeededEverHeld",
       (SELECT count(*)::integer FROM skiplock.job_events e JOIN skiplock.keyed_jobs k ON k.job_id = e.job_id
        WHERE k.tenant = kj.tenant AND k.key = kj.key AND e.kind = 'held') AS "heldEvents"
FROM skiplock.all_jobs a JOIN skiplock.keyed_jobs kj ON kj.job_id = a.id
GROUP BY kj.tenant, kj.key`;

const succeededTwiceSql = /* sql */ `
SELECT id FROM skiplock.finished_jobs WHERE state = 'succeeded' GROUP BY id HAVING count(*) > 1`;

/**
 * Each dropped job against its key's window when it was dropped: its
 * enqueue judged the window from its statement's start (created_at), under
 * the key's lock, and the drop's own clock (finished_at) is after that lock,
 * so the window it saw held at most the starts in (created_at - period,
 * finished_at] and the jobs let through before it not started by then. A
 * drop with fewer than the limit there dropped a job the window had room for.
 */
const dropsSql = /* sql */ `
SELECT c.id, kj.tenant, kj.key, kj.rate_limit AS limit,
       (SELECT count(*)::integer FROM claim_starts r JOIN skiplock.keyed_jobs k ON k.job_id = r.job_id
        WHERE k.tenant = kj.tenant AND k.key = kj.key
          AND r.started_at > c.created_at - make_interval(secs => kj.rate_seconds) AND r.started_at <= c.finished_at)
         AS "inWindow",
       (SELECT count(*)::integer FROM skiplock.all_jobs a JOIN skiplock.keyed_jobs k ON k.job_id = a.id
        WHERE k.tenant = kj.tenant AND k.key = kj.key AND a.created_at < c.created_at AND a.state <> 'cancelled'
          AND NOT EXISTS (SELECT 1 FROM claim_starts r WHERE r.job_id = a.id AND r.started_at <= c.finished_at))
         AS "letThroughUnstarted"
FROM skiplock.finished_jobs c JOIN skiplock.keyed_jobs kj ON kj.job_id = c.id
WHERE c.state = 'cancelled' AND kj.rate_mode = 'drop'`;

describe('scenario 17: rate keys under 8 drains and 8 pull workers, workers killed mid-job', () => {
  it('never starts more of a key than its limit in any window, every attempt counted, and runs every job to success once', {
    timeout: 120_000,
  }, async () => {
    const { db, url } = await open('pg', 4);
    await noteClaimStarts(db);
    const random = seeded(17);
    const inputs: EnqueueInput[] = [
      ...THROTTLED.flatMap((key) => Array.from({ length: key.limit * windowsOf(key) }, () => key)),
      ...Array.from({ length: HELD_KEY_JOBS }, () => HELD_KEY),
    ]
      .map((key) => ({ key, order: random() }))
      .sort((a, b) => a.order - b.order)
      .map(({ key }, seq) => ({
        queue: 'rate',
        type: KEYED_TYPE,
        tenant: key.tenant,
        rateKey: key.key,
        rateLimit: key.limit,
        ratePeriodSeconds: key.periodSeconds,
        payload: { seq, workMs: Math.round(10 + random() * 140), failFirst: random() * FAIL_FIRST_ONE_IN < 1 },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      }));
    inputs.push(
      ...Array.from({ length: SLOW_JOBS }, (_, n) => ({
        queue: 'rate',
        type: KEYED_TYPE,
        tenant: SLOW_KEY.tenant,
        rateKey: SLOW_KEY.key,
        rateLimit: SLOW_KEY.limit,
        ratePeriodSeconds: SLOW_KEY.periodSeconds,
        payload: { seq: inputs.length + n, workMs: SLOW_WORK_MS, failFirst: true },
        leaseSeconds: SLOW_LEASE_SECONDS,
        maxAttempts: 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      })),
    );
    const JOBS = inputs.length;
    const failingFirst = inputs.filter((input) => (input.payload as { failFirst: boolean }).failFirst).length;

    let samplesAbove = 0;
    let slowKeyGoneWhileRunning = 0;
    const sampledBusiest = new Map<string, number>();
    const sampledHeld = new Map<string, number>();
    const started = Date.now();
    const run = await runKeyScenario(spawn, db, url, {
      inputs,
      kills: KILLS,
      async sample(sampler) {
        const rows = await sampler.query<{
          tenant: string;
          key: string;
          limit: number;
          inWindow: number;
          held: number;
        }>({ text: sampleSql, params: [] });
        for (const row of rows) {
          const name = keyName(row);
          sampledBusiest.set(name, Math.max(sampledBusiest.get(name) ?? 0, row.inWindow));
          sampledHeld.set(name, Math.max(sampledHeld.get(name) ?? 0, row.held));
          if (row.inWindow > row.limit) samplesAbove += 1;
        }
        const [slow] = await sampler.query<{ present: boolean; running: number }>({
          text: slowKeySql,
          params: [SLOW_KEY.tenant, SLOW_KEY.key],
        });
        if (!slow!.present && slow!.running > 0) slowKeyGoneWhileRunning += 1;
      },
      during: () => holdKeyRow(url),
    });
    const [duringHold] = await db.query<{ heldKey: number; otherKeys: number; heldKeyWaiting: number }>({
      text: startsDuringHoldSql,
      params: [run.during.from, run.during.until, HELD_KEY.tenant, HELD_KEY.key],
    });
    const holdSeconds = (Date.parse(run.during.until) - Date.parse(run.during.from)) / 1000;

    // The 'drop' keys, with the crew still claiming: a stream far above their rate.
    const dropStarted = Date.now();
    const drops = await dropStream(db, random, () =>
      DROPPING.map((key) => ({
        queue: 'rate-drop',
        type: KEYED_TYPE,
        tenant: key.tenant,
        rateKey: key.key,
        rateLimit: key.limit,
        ratePeriodSeconds: key.periodSeconds,
        rateOnExcess: 'drop' as const,
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
      })),
    );
    const liveLeft = await untilNoLiveJobs(db, 30_000);
    const dropMs = Date.now() - dropStarted;
    const tookMs = Date.now() - started;

    // (a) Every window of every key, from the starts the claims made.
    const windows = await db.query<WindowRow>({ text: windowsSql, params: [] });
    const violations = windows.filter((row) => row.starts > row.limit);
    const perKey = new Map<
      string,
      {
        limit: number;
        periodSeconds: number;
        starts: number;
        busiest: number;
        firstMs: number;
        lastMs: number;
        retries: number;
      }
    >();
    for (const row of windows) {
      const name = keyName(row);
      const key = perKey.get(name) ?? {
        limit: row.limit,
        periodSeconds: row.periodSeconds,
        starts: 0,
        busiest: 0,
        firstMs: row.atMs,
        lastMs: row.atMs,
        retries: 0,
      };
      key.starts += 1;
      key.busiest = Math.max(key.busiest, row.starts);
      key.firstMs = Math.min(key.firstMs, row.atMs);
      key.lastMs = Math.max(key.lastMs, row.atMs);
      if (row.attempt > 1) key.retries += 1;
      perKey.set(name, key);
    }
    const record = await claimStartRecord(db);

    // (b) Every job once, (c) the drop keys' accounting.
    const outcomes = await db.query<{
      tenant: string;
      key: string;
      jobs: number;
      succeeded: number;
      cancelled: number;
      droppedAsSaid: number;
      succeededEverHeld: number;
      heldEvents: number;
    }>({ text: outcomesSql, params: [] });
    const outcomeOf = new Map(outcomes.map((row) => [keyName(row), row]));
    const throttledOutcomes = THROTTLED.map((key) => outcomeOf.get(keyName(key)));
    const dropOutcomes = DROPPING.map((key) => outcomeOf.get(keyName(key)));
    const heldKeyOutcome = outcomeOf.get(keyName(HELD_KEY));
    const slowKeyOutcome = outcomeOf.get(keyName(SLOW_KEY));
    const succeededAtOnce =
      throttledOutcomes.reduce((sum, row) => sum + (row?.succeeded ?? 0), 0) +
      (heldKeyOutcome?.succeeded ?? 0) +
      (slowKeyOutcome?.succeeded ?? 0);
    const acceptedEverHeld = dropOutcomes.reduce((sum, row) => sum + (row?.succeededEverHeld ?? 0), 0);
    const {
      jobs: dropJobs,
      cancelled: dropCancelled,
      succeeded: dropSucceeded,
      explained: dropsExplained,
      droppedWithRoom,
    } = await dropAccounting<JudgedDrop & { id: string; tenant: string; key: string }>(db, dropOutcomes, dropsSql);
    const history = await runHistory(db);
    const succeededTwice = (await db.query<{ id: string }>({ text: succeededTwiceSql, params: [] })).map(
      (row) => row.id,
    );
    const twice = [...new Set([...run.twice, ...history.runTwiceAtOnce, ...succeededTwice])];
    const lost = JOBS - succeededAtOnce + (dropJobs - dropCancelled - dropSucceeded);

    const keyLine = (keys: RateKey[]) =>
      keys
        .map((key) => {
          const name = keyName(key);
          const figures = perKey.get(name);
          if (figures === undefined) return `${name} ${key.limit}/${key.periodSeconds} s: no starts`;
          const span = (figures.lastMs - figures.firstMs) / 1000;
          /** The shortest span that many starts can take at the limit. */
          const tightest = (Math.ceil(figures.starts / key.limit) - 1) * key.periodSeconds;
          return (
            `${name} ${key.limit}/${key.periodSeconds} s: ${figures.starts} starts (${figures.retries} of them later attempts) over ${span.toFixed(1)} s ` +
            `(${(span / key.periodSeconds).toFixed(1)} windows; the limit allows no less than ${tightest} s), busiest window ${figures.busiest}, ` +
            `sampled ${sampledBusiest.get(name) ?? 0}, held at once up to ${sampledHeld.get(name) ?? 0}`
          );
        })
        .join('; ');
    const dropLine = DROPPING.map((key) => {
      const row = outcomeOf.get(keyName(key));
      return `${keyName(key)} ${key.limit}/${key.periodSeconds} s: ${row?.jobs ?? 0} enqueued, ${row?.succeeded ?? 0} let through (all succeeded), ${row?.cancelled ?? 0} dropped`;
    }).join('; ');
    await recordScenario({
      scenario: 17,
      name: 'Rate keys under contention',
      load:
        `${JOBS} jobs: ${JOBS - HELD_KEY_JOBS} of ${THROTTLED.length} throttled rate keys (2 tenants × 4, the same key names with other limits, 3 to 10 starts per 1 or 2 s), ` +
        `each with 4 to 6 windows' worth, ${HELD_KEY_JOBS} of ${keyName(HELD_KEY)}, whose limit never binds, ` +
        `and ${SLOW_JOBS} of ${keyName(SLOW_KEY)} (${SLOW_KEY.limit}/${SLOW_KEY.periodSeconds} s) of ${seconds(SLOW_WORK_MS)} each, failing their first attempt, ` +
        `enqueued at once; work of 10 to 150 ms, ${failingFirst} failing their first attempt; ` +
        `then ${drops.enqueued} jobs of ${DROPPING.length} 'drop' rate keys, one per key every ${DROP_EVERY_MS} ms for ${seconds(DROP_STREAM_MS)}; ` +
        `${DRAINS} drain processes + ${PULL_WORKERS} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
      faults: `all 16 claimers at once; ${keyName(HELD_KEY)}'s row held by another transaction for ${seconds(HOLD_MS)} from the enqueue on; ${run.kills.length} SIGKILLs of workers mid-attempt (${run.cut} attempts cut, ${record.startsAfterLapse} claimed again after their lease lapsed), each replaced; ${run.samples} samples of each key's window`,
      jobsLost: lost,
      runTwiceAtOnce: twice.length,
      limitViolations: violations.length + samplesAbove,
      recovery: `the ${JOBS} jobs enqueued at once done ${seconds(run.tookMs)} after the enqueue, the drop stream settled ${seconds(dropMs)} after it began, ${seconds(tookMs)} in all from the crew's start (each of the 16 first processes ran attempts: ${run.idle.length === 0 ? 'yes' : `not ${run.idle.join(', ')}`})`,
      notes: [
        `limit violations here: windows (period-long, ending at a start) with more starts of a key than its limit, from the start time each claim gave the job (a trigger noted every claim's start: ${record.starts} starts, every attempt of every job, the killed ones' included) (${violations.length}); samples of a key's own window above its limit (${samplesAbove})`,
        `while another transaction held ${keyName(HELD_KEY)}'s row (${holdSeconds.toFixed(1)} s by the database's clock), claims waiting for it: at most ${run.during.mostClaimsWaiting} in ${run.during.samples} samples; the claims started ${duringHold!.otherKeys} jobs of the other keys and ${duringHold!.heldKey} of its ${duringHold!.heldKeyWaiting} waiting: they passed over its jobs rather than wait for it`,
        `throttled keys: ${keyLine(THROTTLED)}`,
        `a key whose jobs outlast its window: ${keyLine([SLOW_KEY])}; its row gone while its jobs ran in ${slowKeyGoneWhileRunning} samples (a started job holds nothing of its key), made again by the claims of their retries, which counted their starts`,
        `drop keys: ${dropLine}; every dropped job cancelled with RateLimitedError, never started (${dropsExplained} of ${dropCancelled}), none dropped while its window had room (${droppedWithRoom.length}), none let through then held (${acceptedEverHeld})`,
        `${record.starts} starts for ${JOBS + dropSucceeded} jobs run: ${record.laterAttempts} later attempts, ${record.startsAfterFailure} after a failed attempt and ${record.startsAfterLapse} after a lease lapsed (the jobs a killed worker held), each counted in its key's window, and ${record.startsAfterRelease} after a drain's deadline cut one off; ${record.handedBack} claims handed back unstarted, their attempts not counted`,
      ],
    });

    // (a) No window of any key above its limit: the evidence (its starts: job, attempt, worker, time) if one is.
    expect(
      violations.map(({ tenant, key, limit, at, starts, evidence }) => ({ tenant, key, limit, at, starts, evidence })),
    ).toEqual([]);
    expect(samplesAbove).toBe(0);
    // A key held elsewhere stalls no claim: the others' jobs went on starting, and none of its jobs started without its lock.
    expect(duringHold).toMatchObject({ heldKey: 0 });
    expect(duringHold!.heldKeyWaiting).toBeGreaterThan(0);
    // Before migration 0025 a claim waited for the key's row: seen waiting for the holder, the claims started 1 to 6 other jobs.
    expect(run.during.samples).toBeGreaterThan(10);
    expect(run.during.mostClaimsWaiting).toBe(0);
    expect(duringHold!.otherKeys).toBeGreaterThan(0);
    // The run itself went as planned.
    expect(run.samplerError).toBeUndefined();
    expect(run.connected).toBe(DRAINS + PULL_WORKERS);
    expect(run.idle).toEqual([]);
    expect(run.kills.length).toBe(KILLS);
    expect(run.counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(liveLeft).toBe(0);
    // The starts noted are the attempts, the handlers' ledger agrees, and a lapsed lease's claim again is among them.
    expect(record).toMatchObject({ attemptsMismatched: 0, notedTwice: 0, ledgerUnclaimed: 0, ledgerBeforeClaim: 0 });
    expect(record.starts).toBe(record.laterAttempts + JOBS + dropSucceeded);
    // Later attempts come after a failed one, a lapsed lease, or one a drain's deadline cut off and handed back.
    expect(record.laterAttempts, JSON.stringify(record.unexplained)).toBe(
      record.startsAfterFailure + record.startsAfterLapse + record.startsAfterRelease,
    );
    // A job that fails its first attempt retries, unless a kill cut that attempt first.
    expect(record.startsAfterFailure).toBeGreaterThanOrEqual(failingFirst - record.startsAfterLapse);
    expect(run.cut).toBeGreaterThan(0);
    expect(record.startsAfterLapse).toBeGreaterThan(0);
    expect(record.startsAfterLapse).toBe(record.leasesLapsed);
    // Every throttled key was held back for several windows: it reached its limit and waited.
    for (const key of THROTTLED) {
      const figures = perKey.get(keyName(key))!;
      expect({ key: keyName(key), busiest: figures.busiest }).toEqual({ key: keyName(key), busiest: key.limit });
      expect((figures.lastMs - figures.firstMs) / 1000).toBeGreaterThanOrEqual(3 * key.periodSeconds);
      expect(outcomeOf.get(keyName(key))!.heldEvents).toBeGreaterThan(0);
    }
    // The slow key was dropped while its jobs ran, and their retries were counted in a window of their own.
    expect(slowKeyGoneWhileRunning).toBeGreaterThan(0);
    expect(perKey.get(keyName(SLOW_KEY))!.starts).toBeGreaterThanOrEqual(2 * SLOW_JOBS);
    expect(perKey.get(keyName(SLOW_KEY))!.busiest).toBeLessThanOrEqual(SLOW_KEY.limit);
    // (b) Every job succeeded, once.
    expect(throttledOutcomes.map((row) => row?.succeeded)).toEqual(THROTTLED.map((key) => key.limit * windowsOf(key)));
    expect(heldKeyOutcome?.succeeded).toBe(HELD_KEY_JOBS);
    expect(slowKeyOutcome?.succeeded).toBe(SLOW_JOBS);
    expect(lost).toBe(0);
    expect(twice).toEqual([]);
    // (c) The drop keys: each job either let through and succeeded, or dropped as the answer said, with cause.
    expect(dropJobs).toBe(drops.enqueued);
    expect(dropCancelled).toBe(drops.answeredCancelled);
    expect(dropsExplained).toBe(dropCancelled);
    expect(droppedWithRoom).toEqual([]);
    expect(acceptedEverHeld).toBe(0);
    for (const [i, key] of DROPPING.entries()) {
      // Let through more than one window's worth, and dropped some.
      expect(dropOutcomes[i]!.succeeded).toBeGreaterThan(key.limit);
      expect(dropOutcomes[i]!.cancelled).toBeGreaterThan(0);
      expect(perKey.get(keyName(key))!.busiest).toBe(key.limit);
    }
  });
});
