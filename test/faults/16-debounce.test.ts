import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { enqueue, type EnqueueInput } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { DRAINS, KEYED_TYPE, PULL_WORKERS, runKeyScenario } from './support/keyed-ledger';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-debounce-${process.pid}.log`));

const KEYS = 16;
const BURSTS = 3;
/** Connections that enqueue each burst at once, and the enqueues each sends. */
const WRITERS = 8;
const PER_WRITER = 3;
const PERIOD_SECONDS = 2;
const MAX_DELAY_SECONDS = 6;
const LEASE_SECONDS = 2;
const KILLS = 2;

/** One enqueue's answer: the job it became, and whether that job existed already. */
interface Answer {
  key: number;
  burst: number;
  seq: number;
  jobId: string;
  debounced: boolean;
}

const input = (key: number, seq: number): EnqueueInput => ({
  queue: 'debounce',
  type: KEYED_TYPE,
  payload: { seq, workMs: 200 },
  debounceKey: `acct-${key}`,
  debouncePeriodSeconds: PERIOD_SECONDS,
  debounceMaxDelaySeconds: MAX_DELAY_SECONDS,
  leaseSeconds: LEASE_SECONDS,
  maxAttempts: 10,
});

/** Waits until the job's first attempt has begun (the ledger has its row): the burst is over. */
async function untilStarted(db: Queryable, jobId: string): Promise<void> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(50)) {
    const [row] = await db.query<{ started: boolean }>({
      text: 'SELECT EXISTS (SELECT 1 FROM keyed_ledger WHERE job_id = $1) AS started',
      params: [jobId],
    });
    if (row!.started) return;
  }
}

/**
 * Each key's bursts one after another, all keys at once: a burst is
 * WRITERS × PER_WRITER enqueues from as many connections at once, then one
 * closing enqueue once they all answered (its payload must be the one that
 * runs), then a wait until the job has started, so the next enqueue begins
 * the next burst.
 */
async function bursts(writers: readonly Db[], watcher: Queryable): Promise<Answer[]> {
  const answers: Answer[] = [];
  let seq = 0;
  await Promise.all(
    Array.from({ length: KEYS }, async (_, key) => {
      for (let burst = 0; burst < BURSTS; burst++) {
        const send = async (db: Queryable) => {
          const mine = seq++;
          const result = await enqueue(db, input(key, mine));
          answers.push({ key, burst, seq: mine, jobId: result.job.id, debounced: result.debounced });
          return result.job.id;
        };
        await Promise.all(
          writers.map(async (writer) => {
            for (let i = 0; i < PER_WRITER; i++) await send(writer);
          }),
        );
        await untilStarted(watcher, await send(writers[key % writers.length]!));
      }
    }),
  );
  return answers;
}

describe('scenario 16: debounce under 8 drains and 8 pull workers, workers killed mid-job', () => {
  it('runs exactly one job per burst, with the burst’s last payload, and loses none', { timeout: 60_000 }, async () => {
    const { db, url } = await open('pg', 4);
    const writers: Db[] = Array.from({ length: WRITERS }, () => pgDb(url, { max: 1 }));
    const watcher = pgDb(url, { max: 1 });
    try {
      const run = await runKeyScenario(spawn, db, url, {
        inputs: [],
        kills: KILLS,
        sample: () => sleep(100),
        during: () => bursts(writers, watcher),
      });
      const answers = run.during;
      const jobs = await db.query<{ id: string; key: string; seq: number; state: string }>({
        text: `SELECT id, dedup_key AS key, (payload->>'seq')::integer AS seq, state FROM skiplock.all_jobs`,
        params: [],
      });
      const attempts = await db.query<{ jobId: string; runs: number }>({
        text: `SELECT job_id AS "jobId", count(*)::integer AS runs FROM keyed_ledger GROUP BY job_id`,
        params: [],
      });

      // Each burst: every enqueue answered with one job, of that burst only.
      const burstJobs = new Map<string, Set<string>>();
      for (const answer of answers) {
        const burst = `${answer.key}/${answer.burst}`;
        burstJobs.set(burst, (burstJobs.get(burst) ?? new Set()).add(answer.jobId));
      }
      const splitBursts = [...burstJobs.values()].filter((ids) => ids.size !== 1).length;
      const jobOwners = new Map<string, Set<string>>();
      for (const [burst, ids] of burstJobs)
        for (const id of ids) jobOwners.set(id, (jobOwners.get(id) ?? new Set()).add(burst));
      const sharedJobs = [...jobOwners.values()].filter((owners) => owners.size > 1).length;
      // The payload that ran is the closing enqueue's, the last to commit; every answered job ran.
      const closing = new Map<string, number>();
      for (const answer of answers) closing.set(answer.jobId, Math.max(closing.get(answer.jobId) ?? -1, answer.seq));
      const byId = new Map(jobs.map((job) => [job.id, job]));
      const lostUpdates = [...closing].filter(([id, seq]) => byId.get(id)?.seq !== seq).length;
      const notRun = [...closing.keys()].filter((id) => byId.get(id)?.state !== 'succeeded').length;
      const expected = KEYS * BURSTS;
      const enqueues = expected * (WRITERS * PER_WRITER + 1);
      const violations = splitBursts + sharedJobs + Math.abs(jobs.length - expected);
      const reruns = attempts.reduce((sum, attempt) => sum + attempt.runs - 1, 0);

      await recordScenario({
        scenario: 16,
        name: 'Debounce under contention',
        load:
          `${KEYS} debounce keys × ${BURSTS} bursts (period ${PERIOD_SECONDS} s, maxDelay ${MAX_DELAY_SECONDS} s); a burst is ` +
          `${WRITERS} connections × ${PER_WRITER} enqueues at once, then a closing enqueue: ${enqueues} enqueues; ` +
          `${DRAINS} drain processes + ${PULL_WORKERS} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
        faults: `enqueues of a key from ${WRITERS} connections at once while all 16 claimers run; ${run.kills.length} SIGKILLs of workers mid-attempt (${run.cut} attempts cut), each replaced`,
        jobsLost: notRun + lostUpdates,
        runTwiceAtOnce: run.twice.length,
        limitViolations: violations,
        recovery: `all ${expected} bursts run ${seconds(run.tookMs)} after the first enqueue`,
        notes: [
          `${expected} bursts made ${jobs.length} jobs (${answers.filter((answer) => answer.debounced).length} of ${enqueues} enqueues debounced into a waiting job)`,
          `violations here: bursts answered with more than one job (${splitBursts}), jobs shared by two bursts (${sharedJobs}), jobs beyond one per burst (${Math.abs(jobs.length - expected)})`,
          `lost here: answered jobs that did not succeed (${notRun}), jobs that ran without their burst's closing payload (${lostUpdates})`,
          `${reruns} attempts run again after a kill cut them`,
        ],
      });

      expect(run.connected).toBe(DRAINS + PULL_WORKERS);
      expect(run.counts).toEqual({ total: expected, succeeded: expected });
      expect(answers).toHaveLength(enqueues);
      expect(violations).toBe(0);
      expect(notRun + lostUpdates).toBe(0);
      expect(run.twice).toEqual([]);
    } finally {
      await Promise.all([...writers, watcher].map((writer) => writer.close()));
    }
  });
});
