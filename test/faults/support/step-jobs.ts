/**
 * The durable-step scenarios' jobs (11 to 13), and the Node worker that runs
 * them: run as a script, this module starts one (startWorker over these
 * definitions, the reaper every 500 ms) for the scenarios to SIGKILL,
 * SIGSTOP and SIGCONT. Every handler writes what it did to a side-effect
 * ledger (`step_ledger`, which the scenario creates in its database) on a
 * connection of its own, so the scenario counts from the database what ran,
 * in which attempt, and when.
 * Environment of the worker: DATABASE_URL, WORKER_ID, WORKER_CONCURRENCY.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { pgDb } from '../../../src/db/pg';
import type { Db, Queryable } from '../../../src/db/types';
import { defineJob, type JobContext } from '../../../src/drain/define-job';
import { sleep } from '../../../src/engine/sleep';
import type { Json } from '../../../src/engine/types';
import { spawnProcessGroup } from '../../../src/local/processes';
import { projectRoot } from '../../support/repository-root';
import { startWorker } from '../../../src/node-worker';
import { LISTENER_NAME } from '../../../src/node-worker/wakeups';
import { runHistory, type Run, type RunHistory } from './history';

/**
 * What the handlers did, one row per mark: `run` when a run of the handler
 * begins, a `do` step's name when its fn had its side effect, `after-sleep`
 * and `after-wait` when a run got past a sleep or a wait. `run_started_at`
 * is the claim the run holds (the job's `started_at` while its lease token
 * owns it), on the database's clock.
 */
export const LEDGER_SQL = `CREATE TABLE step_ledger (
  job_id uuid NOT NULL, mark text NOT NULL, attempt integer NOT NULL, worker_id text NOT NULL,
  run_started_at timestamptz NOT NULL, detail jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())`;

/** The steps of a `durable-steps` job, in order. */
export const STEP_NAMES = ['reserve', 'charge', 'ship', 'notify'] as const;

let ledgerDb: Db | undefined;
const ledger = () => (ledgerDb ??= pgDb(process.env.DATABASE_URL!, { max: 8 }));

/** One ledger row for this run of the job. */
async function note(ctx: JobContext, mark: string, detail: Json = null): Promise<void> {
  await ledger().query({
    text: `INSERT INTO step_ledger (job_id, mark, attempt, worker_id, run_started_at, detail)
           VALUES ($1, $2, $3, $4,
                   coalesce((SELECT started_at FROM skiplock.jobs WHERE id = $1 AND lease_token = $5), $6::timestamptz),
                   $7::jsonb)`,
    params: [
      ctx.job.id,
      mark,
      ctx.attempt,
      ctx.job.workerId ?? '?',
      ctx.job.leaseToken,
      ctx.job.startedAt,
      JSON.stringify(detail),
    ],
  });
}

/**
 * Scenario 11: four `do` steps, each a side effect in the middle of its
 * work (half the step's time before, half after), returning the attempt
 * that ran it. The fn ignores the attempt's signal, as an outside call
 * would: a frozen attempt that wakes up finishes its step.
 */
export const durableSteps = defineJob('durable-steps', z.object({ stepMs: z.number() }), async ({ stepMs }, ctx) => {
  const ran: number[] = [];
  for (const name of STEP_NAMES) {
    const { attempt } = await ctx.step.do(name, async () => {
      await sleep(stepMs / 2);
      await note(ctx, name);
      await sleep(stepMs / 2);
      return { attempt: ctx.attempt };
    });
    ran.push(attempt);
  }
  return ran;
});

/**
 * Scenario 12: sleeps until an end recorded by a `do` step before it, then
 * waits for the `ping` event of its key; notes each run past the sleep and
 * past the wait (with the event's `sentAt`), then works `workMs`.
 */
export const eventWaiter = defineJob(
  'event-waiter',
  z.object({ key: z.string().optional(), sleepMs: z.number().optional(), workMs: z.number() }),
  async ({ key, sleepMs, workMs }, ctx) => {
    await note(ctx, 'run');
    if (sleepMs !== undefined) {
      const plan = await ctx.step.do('plan', () => ({ until: Date.now() + sleepMs }));
      await ctx.step.sleepUntil('nap', plan.until);
      await note(ctx, 'after-sleep', { until: plan.until, now: Date.now() });
    }
    let sentAt: string | null = null;
    if (key !== undefined) {
      const event = await ctx.step.waitForEvent<{ n: number }>('ping', { event: 'ping', key, timeout: '10 minutes' });
      sentAt = event?.sentAt ?? null;
      await note(ctx, 'after-wait', { sentAt, n: event?.payload.n ?? null });
    }
    await sleep(workMs);
    return { sentAt };
  },
);

/** Scenario 13: a child job, `workMs` of work. */
export const stepChild = defineJob(
  'step-child',
  z.object({ n: z.number(), workMs: z.number() }),
  async (payload, ctx) => {
    await note(ctx, 'run');
    await sleep(payload.workMs);
    return payload.n * 2;
  },
);

/** What a child's enqueue sets: short leases (children die with their workers), attempts enough for every kill. */
const CHILD_OPTIONS = { leaseSeconds: 2, maxAttempts: 20, backoffBaseSeconds: 0.1, backoffMaxSeconds: 0.5 };

/** Scenario 13: invokes two children one after the other, parked while each runs. */
export const stepParent = defineJob('step-parent', z.object({ workMs: z.number() }), async ({ workMs }, ctx) => {
  await note(ctx, 'run');
  const first = await ctx.step.invoke('first', stepChild, { n: 1, workMs }, CHILD_OPTIONS);
  const second = await ctx.step.invoke('second', stepChild, { n: 2, workMs }, CHILD_OPTIONS);
  return [first.ok ? first.result : first.status, second.ok ? second.result : second.status];
});

export const STEP_JOBS = [durableSteps, eventWaiter, stepChild, stepParent];

/** A step worker process, as the scenarios handle it. */
export interface StepWorker {
  workerId: string;
  pid: number;
  /** SIGKILL to the whole group: no handler runs, no lease is released. */
  kill(): Promise<void>;
  /** SIGSTOP: frozen as it is, leases and all, until `thaw`. */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
}

/**
 * Starts step workers (this module as a script) as process groups with their
 * output appended to `logFile`, as support/processes.ts starts the others;
 * `killAll` (the scenario's afterEach) SIGKILLs whatever is left.
 */
export function stepWorkers(logFile: string) {
  const started: StepWorker[] = [];
  const signal = (pid: number, name: NodeJS.Signals) => {
    try {
      process.kill(-pid, name);
    } catch {
      // Already gone.
    }
  };
  return {
    async start(databaseUrl: string, workerId: string, concurrency: number): Promise<StepWorker> {
      const log = await open(logFile, 'a');
      try {
        const group = await spawnProcessGroup(
          process.execPath,
          ['--import', 'tsx', join(projectRoot, 'test/faults/support/step-jobs.ts')],
          {
            cwd: projectRoot,
            env: {
              ...process.env,
              DATABASE_URL: databaseUrl,
              WORKER_ID: workerId,
              WORKER_CONCURRENCY: String(concurrency),
            },
            output: log.fd,
          },
        );
        const worker: StepWorker = {
          workerId,
          pid: group.pid,
          async kill() {
            signal(group.pid, 'SIGKILL');
            await group.exited;
          },
          freeze: () => signal(group.pid, 'SIGSTOP'),
          thaw: () => signal(group.pid, 'SIGCONT'),
        };
        started.push(worker);
        return worker;
      } finally {
        await log.close();
      }
    },
    killAll: () => Promise.all(started.splice(0).map((worker) => worker.kill())),
  };
}

/** Jobs a worker holds right now. */
export async function runningJobsOf(db: Queryable, workerId: string): Promise<string[]> {
  const rows = await db.query<{ id: string }>({
    text: "SELECT id FROM skiplock.jobs WHERE state = 'running' AND worker_id = $1",
    params: [workerId],
  });
  return rows.map((row) => row.id);
}

/** Waits (up to 30 s) until `count` workers have their LISTEN connection open on this database: they are up. */
export async function untilWorkersListen(db: Queryable, count: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const [row] = await db.query<{ listening: number }>({
      text: `SELECT count(*)::integer AS listening FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = $1`,
      params: [LISTENER_NAME],
    });
    if (row!.listening >= count || Date.now() > deadline) return;
    await sleep(100);
  }
}

/**
 * Every run of every job, the runs that ended parked included: runHistory's
 * runs, and for each `parked` event the run that began at the last claim its
 * handler noted before it (a parked run writes no `startedAt` in its event).
 * Run twice at once: a claim of a job while an earlier run of it had not ended.
 */
export async function stepRunHistory(db: Queryable): Promise<RunHistory> {
  const { runs } = await runHistory(db);
  const parked = await db.query<Run>({
    text: `SELECT * FROM (
             SELECT a.id AS "jobId", a.tenant, e.worker_id AS "workerId", 'parked' AS "endedBy",
                    (SELECT extract(epoch FROM max(l.run_started_at))::float8 * 1000 FROM step_ledger l
                     WHERE l.job_id = e.job_id AND l.mark = 'run' AND l.run_started_at <= e.at) AS "startMs",
                    extract(epoch FROM e.at)::float8 * 1000 AS "endMs"
             FROM skiplock.job_events e JOIN skiplock.all_jobs a ON a.id = e.job_id
             WHERE e.kind = 'parked') p
           WHERE p."startMs" IS NOT NULL`,
    params: [],
  });
  const all = [...runs, ...parked].sort((a, b) =>
    a.jobId === b.jobId ? a.startMs - b.startMs : a.jobId < b.jobId ? -1 : 1,
  );
  const twice = new Set<string>();
  all.forEach((run, i) => {
    const before = all[i - 1];
    if (before?.jobId === run.jobId && run.startMs < before.endMs) twice.add(run.jobId);
  });
  return { runs: all, runTwiceAtOnce: [...twice] };
}

/** The median and the largest of some numbers (0 for none). */
export function medianAndMax(values: readonly number[]): { median: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { median: sorted[Math.floor((sorted.length - 1) / 2)] ?? 0, max: sorted.at(-1) ?? 0 };
}

// Run as a script: a worker for these jobs.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await startWorker({
    databaseUrl: process.env.DATABASE_URL!,
    workerId: process.env.WORKER_ID!,
    handlers: STEP_JOBS,
    concurrency: Number(process.env.WORKER_CONCURRENCY ?? 8),
    // Small claims, so the jobs of a wave spread over the workers.
    claimBatchSize: 4,
    pollIntervalMs: 100,
    // Reap the leases of a killed or frozen worker soon after they lapse.
    housekeepingIntervalMs: 500,
  });
}
