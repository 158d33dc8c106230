import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { retry, type EnqueueInput } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import {
  DRAINS,
  KEYED_TYPE,
  peakPerKey,
  PULL_WORKERS,
  runKeyScenario,
  seeded,
  type KeyedAttempt,
} from './support/keyed-ledger';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-ordering-${process.pid}.log`));

const TENANTS = ['acme', 'globex'];
const KEYS = 40;
const PER_KEY = 25;
const JOBS = KEYS * PER_KEY;
const LEASE_SECONDS = 2;
const KILLS = 3;
const FAIL_FIRST_ONE_IN = 12;
/** The head that fails for good and holds its key ('hold'), until the scenario retries it HOLD_MS later. */
const DOOMED_KEY = 7;
const DOOMED_SEQ = 10;
const HOLD_MS = 1500;

const keyName = (key: number) => `order-${key}`;

/** Ordering keys with two jobs running at once, and running jobs of a key with an earlier job of it not succeeded. */
const sampleSql = /* sql */ `
WITH running AS (
  SELECT kj.tenant, kj.key, kj.job_id FROM skiplock.jobs j JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
  WHERE j.state = 'running' AND kj.ordered
)
SELECT (SELECT count(*) FROM (SELECT 1 FROM running GROUP BY tenant, key HAVING count(*) > 1) doubled)::integer AS doubled,
       (SELECT count(*) FROM running r
        WHERE EXISTS (SELECT 1 FROM skiplock.keyed_jobs e JOIN skiplock.all_jobs a ON a.id = e.job_id
                      WHERE e.tenant = r.tenant AND e.key = r.key AND e.job_id < r.job_id
                        AND a.state <> 'succeeded'))::integer AS early,
       (SELECT count(*) FROM running)::integer AS running`;

interface KeyedJobRow {
  id: string;
  tenant: string;
  key: string;
  seq: number;
  state: string;
  finishedMs: number | null;
}

/**
 * Attempts that started before every earlier job of their key (in enqueue
 * order) had succeeded, and keys whose jobs' ids (enqueue order) do not
 * follow their `seq`.
 */
function orderViolations(
  jobs: readonly KeyedJobRow[],
  attempts: readonly KeyedAttempt[],
): { early: KeyedAttempt[]; misnumbered: string[] } {
  const byKey = new Map<string, KeyedJobRow[]>();
  for (const job of jobs)
    byKey.set(`${job.tenant}/${job.key}`, [...(byKey.get(`${job.tenant}/${job.key}`) ?? []), job]);
  const misnumbered: string[] = [];
  // Per key and seq: when every job before it had succeeded (Infinity: one never did).
  const clearedAt = new Map<string, number>();
  for (const [key, rows] of byKey) {
    const bySeq = [...rows].sort((a, b) => a.seq - b.seq);
    const byId = [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));
    if (bySeq.some((row, i) => row !== byId[i])) misnumbered.push(key);
    let cleared = 0;
    for (const row of bySeq) {
      clearedAt.set(`${key}#${row.seq}`, cleared);
      const succeededAt =
        row.state === 'succeeded' ? (row.finishedMs ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
      cleared = Math.max(cleared, succeededAt);
    }
  }
  const early = attempts.filter(
    (attempt) =>
      attempt.startMs < (clearedAt.get(`${attempt.tenant}/${attempt.key}#${attempt.seq}`) ?? Number.POSITIVE_INFINITY),
  );
  return { early, misnumbered };
}

describe('scenario 15: ordering keys under 8 drains and 8 pull workers, workers killed mid-job', () => {
  it('starts the jobs of each key one at a time in enqueue order, a held key going on once its head is retried', {
    timeout: 120_000,
  }, async () => {
    const { db, url } = await open('pg', 4);
    const random = seeded(15);
    // The keys' jobs interleaved at random; each key's in its own order.
    const next = Array.from({ length: KEYS }, () => 0);
    const inputs: EnqueueInput[] = [];
    while (inputs.length < JOBS) {
      const unfinished = next.flatMap((seq, key) => (seq < PER_KEY ? [key] : []));
      const key = unfinished[Math.floor(random() * unfinished.length)]!;
      const seq = next[key]!++;
      const doomed = key === DOOMED_KEY && seq === DOOMED_SEQ;
      inputs.push({
        queue: 'ordered',
        type: KEYED_TYPE,
        tenant: TENANTS[key % TENANTS.length]!,
        orderingKey: keyName(key),
        orderingOnFailure: 'hold',
        payload: doomed
          ? { seq, workMs: 20, doomed: true }
          : { seq, workMs: Math.round(3 + random() * 47), failFirst: random() * FAIL_FIRST_ONE_IN < 1 },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: doomed ? 1 : 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      });
    }
    const failingFirst = inputs.filter((input) => (input.payload as { failFirst?: boolean }).failFirst).length;

    let samplesDoubled = 0;
    let samplesEarly = 0;
    let peakRunning = 0;
    // The doomed head fails for good and holds its key; HOLD_MS later the scenario retries it.
    const holding = async () => {
      const blockedKey = async () => {
        const [row] = await db.query<{ blockedBy: string; held: number }>({
          text: `SELECT c.blocked_by AS "blockedBy",
                        (SELECT count(*)::integer FROM skiplock.keyed_jobs kj
                         WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting') AS held
                 FROM skiplock.concurrency_keys c WHERE c.tenant = $1 AND c.key = $2 AND c.blocked_by IS NOT NULL`,
          params: [TENANTS[DOOMED_KEY % TENANTS.length], keyName(DOOMED_KEY)],
        });
        return row;
      };
      for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(50)) {
        const blocked = await blockedKey();
        if (blocked === undefined) continue;
        await sleep(HOLD_MS);
        const stillHeld = (await blockedKey())?.blockedBy === blocked.blockedBy;
        const retried = await retry(db, blocked.blockedBy);
        // The retried head has one attempt again: a kill that lands after its
        // work and before its completion commits lapses its lease, and it fails
        // for good again, holding its key. As an operator would, retry it again.
        let retriedAfterKill = 0;
        for (; Date.now() < deadline; await sleep(50)) {
          const [head] = await db.query<{ state: string }>({
            text: 'SELECT state FROM skiplock.all_jobs WHERE id = $1',
            params: [blocked.blockedBy],
          });
          if (head?.state === 'succeeded') break;
          if ((await blockedKey())?.blockedBy !== blocked.blockedBy) continue;
          if ((await retry(db, blocked.blockedBy))?.retried === true) retriedAfterKill += 1;
        }
        return {
          heldBehind: blocked.held,
          stillHeld,
          retried: retried?.retried === true,
          retriedAfterKill,
          blockedBy: blocked.blockedBy,
        };
      }
      return undefined;
    };
    const run = await runKeyScenario(spawn, db, url, {
      inputs,
      kills: KILLS,
      async sample(sampler) {
        const [row] = await sampler.query<{ doubled: number; early: number; running: number }>({
          text: sampleSql,
          params: [],
        });
        if (row!.doubled > 0) samplesDoubled += 1;
        if (row!.early > 0) samplesEarly += 1;
        peakRunning = Math.max(peakRunning, row!.running);
      },
      during: holding,
    });
    const { attempts, cut, during: hold } = run;
    const jobRows = await db.query<KeyedJobRow>({
      text: `SELECT a.id, kj.tenant, kj.key, (a.payload->>'seq')::integer AS seq, a.state,
                    extract(epoch FROM a.finished_at)::float8 * 1000 AS "finishedMs"
             FROM skiplock.keyed_jobs kj JOIN skiplock.all_jobs a ON a.id = kj.job_id`,
      params: [],
    });
    const doomedId = jobRows.find((row) => row.key === keyName(DOOMED_KEY) && row.seq === DOOMED_SEQ)?.id;
    const { early, misnumbered } = orderViolations(jobRows, attempts);
    const doubledKeys = [...peakPerKey(attempts)].filter(([, peak]) => peak > 1);
    const failedAttempts = attempts.filter((attempt) => attempt.outcome === 'failed').length;
    // The held key's jobs behind its head: none began before the retried head succeeded (counted in `early` too).
    const behindDoomed = attempts.filter((attempt) => attempt.key === keyName(DOOMED_KEY) && attempt.seq > DOOMED_SEQ);
    const behindInOrder = behindDoomed.every((attempt) => !early.includes(attempt));
    const doomedRuns = attempts.filter((attempt) => attempt.jobId === doomedId);
    const violations = samplesDoubled + samplesEarly + early.length + doubledKeys.length + misnumbered.length;

    await recordScenario({
      scenario: 15,
      name: 'Ordering keys under crashes',
      load:
        `${JOBS} jobs of ${KEYS} ordering keys × ${PER_KEY} (${TENANTS.length} tenants), enqueued interleaved, work of 3 to 50 ms, ` +
        `${failingFirst} failing their first attempt, one head failing for good on key hold; ${DRAINS} drain processes + ${PULL_WORKERS} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
      faults:
        `all 16 claimers at once; ${run.kills.length} SIGKILLs of workers mid-attempt (${cut} attempts cut), each replaced; ` +
        `a head failed for good holding its key ${seconds(HOLD_MS)}, then retried; ${run.samples} samples of the running jobs per key`,
      jobsLost: JOBS - run.counts.succeeded,
      runTwiceAtOnce: run.twice.length,
      limitViolations: violations,
      recovery:
        `all ${JOBS} done ${seconds(run.tookMs)} after the enqueue; the held key's ${hold?.heldBehind ?? '?'} jobs behind its head ` +
        (behindInOrder
          ? 'all ran, in order, after the retried head succeeded'
          : 'did not all wait for the retried head'),
      notes: [
        `limit violations here: samples with two jobs of an ordering key running (${samplesDoubled}) or one running before an earlier job of its key succeeded (${samplesEarly}); ` +
          `from the handlers' ledger (a killed attempt running until its kill), attempts begun before every earlier job of their key had succeeded (${early.length}), ` +
          `keys with two attempts at once (${doubledKeys.length}), keys whose enqueue order is not their ids' (${misnumbered.length})`,
        `${attempts.length} attempts for ${JOBS} jobs: ${failedAttempts} failed by design (first attempts of the ${failingFirst} jobs that fail one, and the doomed head's first run, less any a kill cut first), ${cut} cut by a kill and run again after their lease lapsed; at most ${peakRunning} jobs running at once over the ${KEYS} keys`,
        `the doomed head: ${doomedRuns.length} runs; its key held with ${hold?.heldBehind ?? '?'} jobs behind it, still held after ${seconds(HOLD_MS)}: ${hold?.stillHeld ?? '?'}; retried: ${hold?.retried ?? '?'}, and again after a kill cut its retried run: ${hold?.retriedAfterKill ?? '?'} time(s); its ${behindDoomed.length} later attempts all after it succeeded: ${behindInOrder}`,
      ],
    });

    expect(run.samplerError).toBeUndefined();
    expect(run.connected).toBe(DRAINS + PULL_WORKERS);
    expect(run.idle).toEqual([]);
    expect(run.kills.length).toBe(KILLS);
    expect(hold).toMatchObject({
      heldBehind: PER_KEY - DOOMED_SEQ - 1,
      stillHeld: true,
      retried: true,
      blockedBy: doomedId,
    });
    // Its first run failed (or was cut by a kill, and expired), the run after the retry succeeded.
    expect(doomedRuns.length).toBeGreaterThanOrEqual(2);
    expect(doomedRuns.at(-1)?.outcome).toBe('done');
    expect(run.counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(samplesDoubled + samplesEarly).toBe(0);
    expect(early).toEqual([]);
    expect(doubledKeys).toEqual([]);
    expect(misnumbered).toEqual([]);
    expect(run.twice).toEqual([]);
  });
});
