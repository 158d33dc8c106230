import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { sleep } from '../../src/engine/sleep';
import { runHistory, untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { restartablePostgres, type RestartablePostgres } from './support/local-stack';
import { recordScenario, seconds } from './support/report';
import { durableSteps, LEDGER_SQL, runningJobsOf, STEP_NAMES, stepWorkers, type StepWorker } from './support/step-jobs';

const workers = stepWorkers(join(tmpdir(), `skiplock-faults-steps-${process.pid}.log`));
afterEach(workers.killAll);

const JOBS = 160;
const STEP_MS = 400;
const WORKERS = 3;
const CONCURRENCY = 16;
/** Jobs enqueued every WAVE_EVERY_MS: about 16 in flight, of 48 slots. */
const WAVE = 5;
const WAVE_EVERY_MS = 500;
const LEASE_SECONDS = 2;
const OUTAGE_MS = 1500;

interface Kill {
  atMs: number;
  workerId: string;
  /** Jobs the worker held when it was killed. */
  orphans: string[];
}

/** Per (job, step): what the ledger holds beside what job_steps recorded. */
const stepsSql = /* sql */ `
WITH expected AS (
  SELECT j.id AS job_id, s.name FROM skiplock.all_jobs j CROSS JOIN unnest($1::text[]) AS s(name)
  WHERE j.type = 'durable-steps'
),
effects AS (
  SELECT job_id, mark AS name, count(*)::integer AS effects, count(DISTINCT attempt)::integer AS attempts_with_effects,
         max(attempt) AS last_effect_attempt,
         array_agg(attempt ORDER BY attempt) AS effect_attempts
  FROM step_ledger GROUP BY job_id, mark
)
SELECT x.job_id AS "jobId", x.name,
       (SELECT count(*)::integer FROM skiplock.job_steps s WHERE s.job_id = x.job_id AND s.name = x.name AND s.done) AS "doneRows",
       s.attempt AS "recordedAttempt", (s.result->>'attempt')::integer AS "ranInAttempt",
       coalesce(f.effects, 0) AS effects, coalesce(f.attempts_with_effects, 0) AS "attemptsWithEffects",
       f.last_effect_attempt AS "lastEffectAttempt", coalesce(f.effect_attempts, '{}') AS "effectAttempts",
       a.attempts AS "jobAttempts"
FROM expected x
JOIN skiplock.all_jobs a ON a.id = x.job_id
LEFT JOIN skiplock.job_steps s ON s.job_id = x.job_id AND s.name = x.name
LEFT JOIN effects f ON f.job_id = x.job_id AND f.name = x.name`;

interface LedgerRow {
  jobId: string;
  name: string;
  attempt: number;
  workerId: string;
  atMs: number;
}

interface StepRow {
  jobId: string;
  name: string;
  doneRows: number;
  recordedAttempt: number | null;
  ranInAttempt: number | null;
  effects: number;
  attemptsWithEffects: number;
  lastEffectAttempt: number | null;
  effectAttempts: number[];
  jobAttempts: number;
}

describe('scenario 11: durable steps under SIGKILL, SIGSTOP past the lease and a Postgres restart', () => {
  let postgres: RestartablePostgres | undefined;
  afterAll(async () => {
    await postgres?.remove();
  });

  it('records each step once, never runs a recorded step again, and records nothing from a stale attempt', {
    timeout: 180_000,
  }, async () => {
    postgres = await restartablePostgres();
    const db = pgDb(postgres.url, { max: 2 });
    await db.query({ text: LEDGER_SQL, params: [] });
    let generation = 0;
    const startWorker = () => workers.start(postgres!.url, `steps-${++generation}`, CONCURRENCY);
    const live: StepWorker[] = await Promise.all(Array.from({ length: WORKERS }, startWorker));
    const started = Date.now();
    // The jobs come in waves, so a job handed back is claimed again at once rather than behind a backlog.
    let enqueued = 0;
    const producing = (async () => {
      while (enqueued < JOBS) {
        try {
          await enqueueMany(
            db,
            // A dedup key per job: a wave sent again after an error that hid its commit adds nothing.
            jobs(WAVE, (i) => ({
              dedupKey: `job-${enqueued + i}`,
              queue: 'steps',
              type: durableSteps.type,
              payload: { stepMs: STEP_MS },
              leaseSeconds: LEASE_SECONDS,
              maxAttempts: 25,
              backoffBaseSeconds: 0.1,
              backoffMaxSeconds: 0.5,
            })),
          );
          enqueued += WAVE;
        } catch {
          // Postgres is down for a moment: the wave is sent again after.
        }
        await sleep(WAVE_EVERY_MS);
      }
    })();
    // The faults begin once every worker has claimed (starting a worker takes a few seconds on 2 cores).
    const working = async () => {
      const [row] = await db.query<{ claimers: number }>({
        text: 'SELECT count(DISTINCT worker_id)::integer AS claimers FROM skiplock.all_jobs WHERE worker_id = ANY($1::text[])',
        params: [live.map((worker) => worker.workerId)],
      });
      return row!.claimers === live.length;
    };
    while (!(await working()) && Date.now() - started < 20_000) await sleep(100);

    let frozen: { worker: StepWorker; held: string[] } | undefined;
    /** The live worker that holds the most jobs right now (mid-step: the steps are nearly all of a job's time), if any does. */
    const busyWorker = async (): Promise<{ worker: StepWorker; held: string[] } | undefined> => {
      let busiest: { worker: StepWorker; held: string[] } | undefined;
      for (const worker of live) {
        // The thawed worker is left to finish what it woke up with.
        if (worker === frozen?.worker) continue;
        const held = await runningJobsOf(db, worker.workerId);
        if (held.length > (busiest?.held.length ?? 0)) busiest = { worker, held };
      }
      return busiest;
    };
    const kills: Kill[] = [];
    const killOne = async () => {
      const busy = await busyWorker();
      if (busy === undefined) return;
      await busy.worker.kill();
      kills.push({ atMs: Date.now(), workerId: busy.worker.workerId, orphans: busy.held });
      live.splice(live.indexOf(busy.worker), 1, await startWorker());
    };

    // 1. A SIGKILL mid-step.
    await sleep(1500);
    await killOne();

    // 2. A worker frozen with its jobs until others have taken half over (their leases lapsed, reaped, claimed again), then thawed.
    await sleep(1000);
    frozen = await busyWorker();
    for (let tries = 0; frozen === undefined && tries < 20; tries++) {
      await sleep(100);
      frozen = await busyWorker();
    }
    let frozenMs = 0;
    let takenOver: string[] = [];
    let frozenAt = 0;
    const frozenAttempts = new Map<string, number>();
    if (frozen !== undefined) {
      frozenAt = Date.now();
      frozen.worker.freeze();
      // The attempts it holds, frozen: what it does with them after its SIGCONT is what a stale owner does.
      const attempts = await db.query<{ id: string; attempts: number }>({
        text: "SELECT id, attempts FROM skiplock.jobs WHERE id = ANY($1::uuid[]) AND state = 'running' AND worker_id = $2",
        params: [frozen.held, frozen.worker.workerId],
      });
      for (const { id, attempts: attempt } of attempts) frozenAttempts.set(id, attempt);
      const owners = async () =>
        db.query<{ id: string }>({
          text: "SELECT id FROM skiplock.jobs WHERE id = ANY($1::uuid[]) AND state = 'running' AND worker_id <> $2",
          params: [frozen.held, frozen.worker.workerId],
        });
      const frozenFor = () => Date.now() - frozenAt;
      while (
        (takenOver.length < frozen.held.length / 2 || frozenFor() < LEASE_SECONDS * 1000 + 500) &&
        frozenFor() < 10_000
      ) {
        await sleep(100);
        takenOver = (await owners()).map((row) => row.id);
      }
      // Thawed past its lease, once new owners hold half its jobs: the last taken over run the same step as the old one, nearer its checkpoint.
      frozen.worker.thaw();
      frozenMs = Date.now() - frozenAt;
    }

    // 3. Postgres stopped (fast shutdown) while steps are between their side effect and their checkpoint, and started again.
    await sleep(1500);
    let awaitingCheckpoint = 0;
    for (const until = Date.now() + 5000; awaitingCheckpoint < 3 && Date.now() < until; await sleep(10)) {
      const [row] = await db.query<{ awaiting: number }>({
        text: `SELECT count(*)::integer AS awaiting FROM step_ledger l
               WHERE l.at > clock_timestamp() - make_interval(secs => $1 / 1000.0)
                 AND NOT EXISTS (SELECT 1 FROM skiplock.job_steps s WHERE s.job_id = l.job_id AND s.name = l.mark)`,
        params: [STEP_MS / 4],
      });
      awaitingCheckpoint = row!.awaiting;
    }
    const stoppedAt = Date.now();
    await postgres.stop();
    await sleep(OUTAGE_MS);
    await postgres.start();
    const restartedAt = Date.now();

    // 4. Another SIGKILL, once the workers are back at it.
    await sleep(2500);
    await killOne();

    await producing;
    const counts = await untilAllSucceeded(db, 60_000);
    const drainedInMs = Date.now() - started;

    const history = await runHistory(db);
    const steps = await db.query<StepRow>({ text: stepsSql, params: [[...STEP_NAMES]] });
    const [firstAfterRestart] = await db.query<{ atMs: number | null }>({
      text: 'SELECT extract(epoch FROM min(recorded_at))::float8 * 1000 AS "atMs" FROM skiplock.job_steps WHERE recorded_at > to_timestamp($1 / 1000.0)',
      params: [restartedAt],
    });
    const ledgerRows = await db.query<LedgerRow>({
      text: 'SELECT job_id AS "jobId", mark AS name, attempt, worker_id AS "workerId", extract(epoch FROM at)::float8 * 1000 AS "atMs" FROM step_ledger',
      params: [],
    });
    await db.close();

    // Exactly one done record per (job, step).
    const notRecordedOnce = steps.filter((step) => step.doneRows !== 1);
    // A recorded step never runs again: no side effect in an attempt after the one that recorded it.
    const ranAfterRecord = steps.filter(
      (step) => step.recordedAttempt !== null && (step.lastEffectAttempt ?? 0) > step.recordedAttempt,
    );
    // A record by an attempt that did not own the job: the result says which attempt ran the fn, the ledger that it did.
    const stale = steps.filter(
      (step) =>
        step.recordedAttempt === null ||
        step.ranInAttempt !== step.recordedAttempt ||
        !step.effectAttempts.includes(step.recordedAttempt),
    );
    // Side effects per step: at most one per attempt, so never more than the job's attempts.
    const aboveAttempts = steps.filter(
      (step) => step.effects > step.jobAttempts || step.effects > step.attemptsWithEffects,
    );

    const recorded = new Map(steps.map((step) => [`${step.jobId}/${step.name}`, step.recordedAttempt]));
    const unrecordedEffects = ledgerRows.filter((row) => recorded.get(`${row.jobId}/${row.name}`) !== row.attempt);
    // Each side effect that its attempt did not record, put down to the first fault after it that reached its worker.
    const ofFrozenAttempt = (row: { jobId: string; attempt: number }) => frozenAttempts.get(row.jobId) === row.attempt;
    const faults = [
      ...kills.map((kill) => ({
        cause: 'kill',
        reaches: (row: LedgerRow) => row.workerId === kill.workerId,
        fromMs: kill.atMs,
        toMs: kill.atMs,
      })),
      // The thawed worker finishes the steps of the attempts it held a moment after its SIGCONT.
      { cause: 'freeze', reaches: ofFrozenAttempt, fromMs: frozenAt, toMs: frozenAt + frozenMs + STEP_MS },
      { cause: 'restart', reaches: () => true, fromMs: stoppedAt, toMs: restartedAt },
    ];
    const byCause: Record<string, number> = { kill: 0, freeze: 0, restart: 0, other: 0 };
    for (const row of unrecordedEffects) {
      const first = faults
        .filter((fault) => fault.reaches(row) && fault.toMs >= row.atMs)
        .sort((a, b) => Math.max(a.fromMs, row.atMs) - Math.max(b.fromMs, row.atMs))[0];
      byCause[first?.cause ?? 'other']! += 1;
    }
    const staleWakeEffects = ledgerRows.filter((row) => ofFrozenAttempt(row) && row.atMs >= frozenAt + frozenMs);
    const staleWakeRefused = staleWakeEffects.filter((row) => recorded.get(`${row.jobId}/${row.name}`) !== row.attempt);
    const maxAttempts = Math.max(0, ...steps.map((step) => step.jobAttempts));
    const orphanRecovery = kills.flatMap((kill) =>
      kill.orphans.map((id) => {
        const killed = history.runs.find((run) => run.jobId === id && run.workerId === kill.workerId);
        return {
          endedBy: killed?.endedBy ?? null,
          reapedAfterMs: (killed?.endMs ?? Number.POSITIVE_INFINITY) - kill.atMs,
        };
      }),
    );
    const reaped = orphanRecovery.filter((orphan) => orphan.endedBy === 'lease_expired');
    const violations = notRecordedOnce.length + ranAfterRecord.length + stale.length + aboveAttempts.length;

    await recordScenario({
      scenario: 11,
      name: 'Durable steps under crashes',
      load: `${JOBS} jobs of ${STEP_NAMES.length} \`do\` steps of ${STEP_MS} ms (a side effect in the middle of each) enqueued ${WAVE} every ${WAVE_EVERY_MS} ms, on ${WORKERS} Node workers × ${CONCURRENCY}, lease ${LEASE_SECONDS} s`,
      faults:
        `${kills.length} SIGKILLs of workers mid-step (${kills.reduce((sum, kill) => sum + kill.orphans.length, 0)} jobs orphaned), ` +
        `1 worker SIGSTOPped ${seconds(frozenMs)} with ${frozen?.held.length ?? 0} jobs (${takenOver.length} taken over by others before its SIGCONT), ` +
        `Postgres stopped ${seconds(restartedAt - stoppedAt)} (fast shutdown) with ${awaitingCheckpoint} side effects awaiting their checkpoint, and started again`,
      jobsLost: JOBS - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: violations,
      recovery:
        `orphans handed back ≤ ${seconds(Math.max(0, ...reaped.map((orphan) => orphan.reapedAfterMs)))} after a kill; ` +
        `first step recorded ${firstAfterRestart?.atMs ? seconds(firstAfterRestart.atMs - restartedAt) : 'never'} after Postgres was back; all done in ${seconds(drainedInMs)}`,
      notes: [
        `limit violations here: steps not recorded exactly once (${notRecordedOnce.length}), recorded steps run again by a later attempt (${ranAfterRecord.length}), steps recorded by an attempt that did not run them or own the job (${stale.length}), steps with more side effects than attempts (${aboveAttempts.length})`,
        `side effects: ${ledgerRows.length} for ${steps.length} steps; the ${unrecordedEffects.length} extra ones came from attempts that lost the job before their checkpoint (SIGKILL ${byCause.kill}, SIGSTOP ${byCause.freeze}, Postgres restart ${byCause.restart}, other ${byCause.other}); each of those steps was recorded by a later attempt, which ran it again`,
        `after its SIGCONT the thawed worker finished ${staleWakeEffects.length} step(s) of the attempts it held: ${staleWakeRefused.length} refused at their checkpoint (the job had a new owner), ${staleWakeEffects.length - staleWakeRefused.length} recorded (a job still its own: its lapsed lease not reaped yet)`,
        `${counts.succeeded} of ${counts.total} succeeded; at most ${maxAttempts} attempts for a job; ${history.runs.length} runs in the event log`,
      ],
    });

    expect(counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(notRecordedOnce).toEqual([]);
    expect(ranAfterRecord).toEqual([]);
    expect(stale).toEqual([]);
    expect(aboveAttempts).toEqual([]);
    expect(kills.length).toBeGreaterThan(0);
    expect(takenOver.length).toBeGreaterThan(0);
    expect(unrecordedEffects.length).toBeGreaterThan(0);
  });
});
