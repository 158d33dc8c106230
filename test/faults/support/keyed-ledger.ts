/**
 * The key scenarios' job (14 and 15), its side-effect ledger, and what the
 * scenarios count from it. Each attempt of a `keyed` job writes a ledger row
 * when its work begins and stamps it when the work ends, on the database's
 * clock (`keyed_ledger`, which the scenario creates in its database), so the
 * scenario sees every execution as its worker did: an attempt whose worker
 * was SIGKILLed ran until the kill, whatever the job's row says after.
 */
import { z } from 'zod';
import { pgDb } from '../../../src/db/pg';
import type { Db, Queryable } from '../../../src/db/types';
import { defineJob } from '../../../src/drain/define-job';
import type { EnqueueInput } from '../../../src/engine';
import { sleep } from '../../../src/engine/sleep';
import { peakConcurrency, runHistory, untilAllSucceeded } from './history';
import { enqueueMany } from './load';
import type { processes, Spawned } from './processes';

const KEYED_LEDGER_SQL = `CREATE TABLE keyed_ledger (
  n bigserial PRIMARY KEY, job_id uuid NOT NULL, attempt integer NOT NULL, worker_id text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz, outcome text)`;

/** Creates the ledger in the scenario's database, before any `keyed` job runs. */
export async function createKeyedLedger(db: Queryable): Promise<void> {
  await db.query({ text: KEYED_LEDGER_SQL, params: [] });
}

export const KEYED_TYPE = 'keyed';

/**
 * `seq`: the job's place among its key's jobs in enqueue order. `failFirst`:
 * its first attempt fails (and retries). `doomed`: its first run fails, for
 * good with maxAttempts 1; a run after it (a retry) succeeds.
 */
export const keyedPayload = z.object({
  seq: z.number().int(),
  workMs: z.number(),
  failFirst: z.boolean().optional(),
  doomed: z.boolean().optional(),
});
export type KeyedPayload = z.infer<typeof keyedPayload>;

/** One attempt: its ledger row, `workMs` of work, the end stamped, then its outcome. */
export async function runKeyedAttempt(
  ledger: Queryable,
  job: { id: string; attempt: number; workerId: string },
  payload: KeyedPayload,
): Promise<void> {
  const [row] = await ledger.query<{ n: string; before: number }>({
    text: `INSERT INTO keyed_ledger (job_id, attempt, worker_id) VALUES ($1, $2, $3)
           RETURNING n::text, (SELECT count(*)::integer FROM keyed_ledger WHERE job_id = $1) AS before`,
    params: [job.id, job.attempt, job.workerId],
  });
  await sleep(payload.workMs);
  const fails = (payload.failFirst === true && job.attempt === 1) || (payload.doomed === true && row!.before === 0);
  await ledger.query({
    text: 'UPDATE keyed_ledger SET ended_at = clock_timestamp(), outcome = $2 WHERE n = $1::bigint',
    params: [row!.n, fails ? 'failed' : 'done'],
  });
  if (fails) throw new Error(`${payload.doomed === true ? 'doomed' : 'first attempt'} fails`);
}

/** The job type as a drain runs it. */
export const keyedJob = (ledger: Queryable, workerId: string) =>
  defineJob(KEYED_TYPE, keyedPayload, (payload, ctx) =>
    runKeyedAttempt(ledger, { id: ctx.job.id, attempt: ctx.attempt, workerId }, payload),
  );

/** A deterministic random source (mulberry32), so runs are alike. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One execution of a keyed job, from the ledger. */
export interface KeyedAttempt {
  jobId: string;
  tenant: string;
  key: string;
  limit: number;
  seq: number;
  attempt: number;
  workerId: string;
  startMs: number;
  /** When its work ended; an attempt cut by a SIGKILL ends at the kill; Infinity: never ended. */
  endMs: number;
  outcome: string | null;
}

/** One execution of a job as its worker saw it, from the ledger alone. */
export type LedgerRun = Pick<KeyedAttempt, 'jobId' | 'attempt' | 'workerId' | 'startMs' | 'endMs' | 'outcome'>;

/**
 * Every attempt in the ledger, whatever became of its job's row since (a
 * bulk delete may have removed it); an unended one of a killed worker ends
 * when the kill landed.
 */
export async function ledgerRuns(db: Queryable, killedAtMs: ReadonlyMap<string, number>): Promise<LedgerRun[]> {
  const rows = await db.query<Omit<LedgerRun, 'endMs'> & { endMs: number | null }>({
    text: `SELECT job_id AS "jobId", attempt, worker_id AS "workerId", outcome,
                  extract(epoch FROM started_at)::float8 * 1000 AS "startMs",
                  extract(epoch FROM ended_at)::float8 * 1000 AS "endMs"
           FROM keyed_ledger ORDER BY started_at`,
    params: [],
  });
  return rows.map((row) => ({ ...row, endMs: endOf(row, killedAtMs) }));
}

function endOf(row: { endMs: number | null; workerId: string }, killedAtMs: ReadonlyMap<string, number>): number {
  return row.endMs ?? killedAtMs.get(row.workerId) ?? Number.POSITIVE_INFINITY;
}

/** Every attempt in the ledger, with its key; an unended one of a killed worker ends when the kill landed. */
async function keyedAttempts(db: Queryable, killedAtMs: ReadonlyMap<string, number>): Promise<KeyedAttempt[]> {
  const rows = await db.query<Omit<KeyedAttempt, 'endMs'> & { endMs: number | null }>({
    text: `SELECT l.job_id AS "jobId", kj.tenant, kj.key, kj.slots AS limit, (a.payload->>'seq')::integer AS seq,
                  l.attempt, l.worker_id AS "workerId", l.outcome,
                  extract(epoch FROM l.started_at)::float8 * 1000 AS "startMs",
                  extract(epoch FROM l.ended_at)::float8 * 1000 AS "endMs"
           FROM keyed_ledger l
           JOIN skiplock.keyed_jobs kj ON kj.job_id = l.job_id
           JOIN skiplock.all_jobs a ON a.id = l.job_id
           ORDER BY l.started_at`,
    params: [],
  });
  return rows.map((row) => ({ ...row, endMs: endOf(row, killedAtMs) }));
}

/** The most attempts of each key (`tenant/key`) whose work overlapped, at any instant. */
export function peakPerKey(attempts: readonly KeyedAttempt[]): Map<string, number> {
  return peakConcurrency(
    attempts.map((attempt) => ({
      tenant: `${attempt.tenant}/${attempt.key}`,
      startMs: attempt.startMs,
      endMs: attempt.endMs,
    })),
  );
}

/** Jobs with two attempts whose work overlapped (the ledger's view of run twice at once). */
export function overlappingAttempts(attempts: readonly LedgerRun[]): string[] {
  const byJob = new Map<string, LedgerRun[]>();
  for (const attempt of attempts) byJob.set(attempt.jobId, [...(byJob.get(attempt.jobId) ?? []), attempt]);
  const twice: string[] = [];
  for (const [jobId, runs] of byJob) {
    const sorted = [...runs].sort((a, b) => a.startMs - b.startMs);
    if (sorted.some((run, i) => i > 0 && run.startMs < sorted[i - 1]!.endMs)) twice.push(jobId);
  }
  return twice;
}

/** Jobs that ended succeeded more than once. */
export async function succeededTwice(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ id: string }>({
    text: "SELECT id FROM skiplock.finished_jobs WHERE state = 'succeeded' GROUP BY id HAVING count(*) > 1",
    params: [],
  });
  return rows.map((row) => row.id);
}

export interface CrewKill {
  workerId: string;
  /** On the database's clock, when the signal was sent. */
  atMs: number;
  /** Attempts whose work had begun and not ended when the kill landed. */
  cutAttempts: number;
}

export const DRAINS = 8;
export const PULL_WORKERS = 8;

/**
 * Drain processes and pull-worker processes (support/keyed-worker.ts), 8 of
 * each unless `size` says otherwise, on one database, all claiming at once;
 * `kill` SIGKILLs one of a kind whose work is under way and starts another
 * in its place.
 */
export async function startCrew(
  spawn: ReturnType<typeof processes>,
  db: Db,
  url: string,
  size: { drains: number; pulls: number } = { drains: DRAINS, pulls: PULL_WORKERS },
) {
  let generation = 0;
  const start = (mode: 'drain' | 'pull') => spawn.keyedWorker(url, `${mode}-${++generation}`, mode);
  const live: Spawned[] = await Promise.all([
    ...Array.from({ length: size.drains }, () => start('drain')),
    ...Array.from({ length: size.pulls }, () => start('pull')),
  ]);
  const first = live.map((child) => child.workerId);
  const kills: CrewKill[] = [];
  const unended = async (workerId: string) => {
    const [row] = await db.query<{ open: number }>({
      text: 'SELECT count(*)::integer AS open FROM keyed_ledger WHERE worker_id = $1 AND ended_at IS NULL',
      params: [workerId],
    });
    return row!.open;
  };
  return {
    kills,
    /** Waits (up to `timeoutMs`) until every process is connected (each names its connections after itself); how many are. */
    async untilAllConnected(timeoutMs: number): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [row] = await db.query<{ connected: number }>({
          text: `SELECT count(DISTINCT application_name)::integer AS connected FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = ANY($1::text[])`,
          params: [live.map((child) => child.workerId)],
        });
        if (row!.connected >= live.length || Date.now() > deadline) return row!.connected;
        await sleep(100);
      }
    },
    /** The first processes (those started at once) that began no attempt. */
    firstIdle: async (): Promise<string[]> => {
      const rows = await db.query<{ id: string }>({
        text: `SELECT id FROM unnest($1::text[]) AS w(id)
               WHERE NOT EXISTS (SELECT 1 FROM keyed_ledger l WHERE l.worker_id = w.id)`,
        params: [first],
      });
      return rows.map((row) => row.id);
    },
    /** SIGKILLs the worker of this kind with the most attempts under way (tries for up to 10 s); true if one was killed. */
    async kill(mode: 'drain' | 'pull'): Promise<boolean> {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(5)) {
        const [busiest] = await db.query<{ workerId: string }>({
          text: `SELECT worker_id AS "workerId" FROM keyed_ledger WHERE ended_at IS NULL AND worker_id = ANY($1::text[])
                 GROUP BY worker_id ORDER BY count(*) DESC LIMIT 1`,
          params: [live.filter((child) => child.workerId.startsWith(mode)).map((child) => child.workerId)],
        });
        const victim = live.find((child) => child.workerId === busiest?.workerId);
        if (victim === undefined) continue;
        // The database's clock just before the signal, moved on by the local time to it: the process runs no
        // more work once SIGKILL is sent, while its exit can be seen much later on a loaded machine, which would
        // stretch its cut attempts past the lease that hands them to another worker.
        const [row] = await db.query<{ atMs: number }>({
          text: 'SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS "atMs"',
          params: [],
        });
        const answeredAt = performance.now();
        const exited = victim.kill();
        const atMs = row!.atMs + (performance.now() - answeredAt);
        await exited;
        kills.push({ workerId: victim.workerId, atMs, cutAttempts: await unended(victim.workerId) });
        live.splice(live.indexOf(victim), 1, await start(mode));
        return true;
      }
      return false;
    },
    killedAt: () => new Map(kills.map((kill) => [kill.workerId, kill.atMs])),
  };
}

export interface KeyScenarioRun<During> {
  /** Processes connected before the jobs came (16 when all were). */
  connected: number;
  counts: { total: number; succeeded: number };
  /** From the enqueue until every job had succeeded. */
  tookMs: number;
  samples: number;
  /** What stopped the sampler, if anything did before the end. */
  samplerError: unknown;
  kills: CrewKill[];
  /** Attempts cut by the kills. */
  cut: number;
  attempts: KeyedAttempt[];
  /** Of the first 16 processes, those that ran no attempt. */
  idle: string[];
  /** Jobs run twice at once: from the job history, from the ledger, or succeeded twice. */
  twice: string[];
  during: During;
}

/**
 * One run of a key scenario: the crew started, and once all 16 are
 * connected the jobs enqueued (so all claim from the first job on); `during`
 * runs alongside from then, and `kills` SIGKILLs alternate drains and pull
 * workers, a second apart, each mid-attempt; then until every job has
 * succeeded (60 s at most). `sample` runs again and again meanwhile on a
 * connection of its own; a sample that fails stops the sampler (a failed
 * scenario's database is dropped under it), which the run reports.
 */
export async function runKeyScenario<During>(
  spawn: ReturnType<typeof processes>,
  db: Db,
  url: string,
  options: { inputs: readonly EnqueueInput[]; kills: number; sample(db: Db): Promise<void>; during(): Promise<During> },
): Promise<KeyScenarioRun<During>> {
  await createKeyedLedger(db);
  const sampler = pgDb(url, { max: 1 });
  let done = false;
  let samples = 0;
  const sampling = (async () => {
    while (!done) {
      await options.sample(sampler);
      samples += 1;
      await sleep(3);
    }
  })().then(
    () => undefined,
    (error: unknown) => error,
  );

  const crew = await startCrew(spawn, db, url);
  const connected = await crew.untilAllConnected(60_000);
  const started = Date.now();
  await enqueueMany(db, options.inputs);
  const during = options.during();
  for (let i = 0; i < options.kills; i++) {
    await sleep(1000);
    await crew.kill(i % 2 === 0 ? 'drain' : 'pull');
  }
  const duringResult = await during;
  const counts = await untilAllSucceeded(db, 60_000);
  const tookMs = Date.now() - started;
  done = true;
  const samplerError = await sampling;
  await sampler.close();

  const attempts = await keyedAttempts(db, crew.killedAt());
  const history = await runHistory(db);
  const runs = await ledgerRuns(db, crew.killedAt());
  const twiceBySource = {
    history: history.runTwiceAtOnce,
    ledger: overlappingAttempts(runs),
    succeededTwice: await succeededTwice(db),
  };
  const twice = new Set(Object.values(twiceBySource).flat());
  if (twice.size > 0) {
    // Which view saw it, and each such job's runs, for the failure's reader.
    const ofTwice = <T extends { jobId: string }>(rows: readonly T[]) => rows.filter((row) => twice.has(row.jobId));
    console.error(
      'run twice at once',
      JSON.stringify({ twiceBySource, kills: crew.kills, ledger: ofTwice(runs), history: ofTwice(history.runs) }),
    );
  }
  return {
    connected,
    counts,
    tookMs,
    samples,
    samplerError,
    kills: crew.kills,
    cut: crew.kills.reduce((sum, kill) => sum + kill.cutAttempts, 0),
    attempts,
    idle: await crew.firstIdle(),
    twice: [...twice],
    during: duringResult,
  };
}
