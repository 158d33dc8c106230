/**
 * `npm run bench:tags`: what tags and the search indexes cost the hot path,
 * on the benchmark's server (DATABASE_URL, else an embedded Postgres as
 * `npm run bench` starts). Each round enqueues JOBS jobs (1,000 a
 * statement, each with an object payload), then CLAIMERS connections drain
 * them (claims of 100, each completed, so every job also moves to the
 * history), in four databases:
 *
 * - A: no tags, and none of 0011's indexes (dropped): skiplock before tags;
 * - B: every job with two tags, 0011's indexes as shipped (the history's
 *   tag and payload indexes);
 * - C: B plus a tag index on the live jobs' tags (skiplock.job_tags), which
 *   0011 and 0021 leave out;
 * - D: B plus a payload index on the live table, which 0011 leaves out.
 *
 * The order turns each round. Prints jobs/s of both phases per round and the
 * medians against A, with the Postgres server's CPU per drained job and the
 * server's time in the claim and the completion statements per job (the
 * claim rate apart from the history's indexes, which only completions
 * write), and the WAL each of the enqueue, claim and completion statements
 * writes per job (what a tagged job costs each, steadier than times on a
 * loaded machine); JSON to $TMPDIR/skiplock-tags.json.
 */
import { writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgDb } from '../src/db/pg';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueueBatch, type EnqueueInput } from '../src/engine/enqueue';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { type CpuMeter, cpuMeter } from './cpu';
import { statementCounter, statementTime } from './db-metrics';
import { createDatabase, startBenchServer, type BenchDatabase } from './postgres';
import { progress } from './progress';
import { median } from './stats';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const JOBS = setting('JOBS', 20_000);
const CLAIMERS = setting('CLAIMERS', 4);
const ROUNDS = setting('ROUNDS', 3);
/** A drain that takes longer is broken, not slow. */
const DEADLINE_MS = 600_000;

type Variant = 'A' | 'B' | 'C' | 'D';
/**
 * Jobs/s of each phase; the Postgres server's CPU per drained job; and the
 * server's time in the claim and in the completion statements per job
 * (pg_stat_statements): the claim rate apart from the completions that move
 * jobs to the history and its indexes. Each ms figure is undefined where the
 * server does not give it.
 */
type Rates = {
  enqueue: number;
  drain: number;
  drainCpuMsPerJob?: number | undefined;
  claimMsPerJob?: number | undefined;
  completeMsPerJob?: number | undefined;
  enqueueWalPerJob?: number | undefined;
  claimWalPerJob?: number | undefined;
  completeWalPerJob?: number | undefined;
};
const VARIANTS = ['A', 'B', 'C', 'D'] as const;

const DROP_ALL = 'DROP INDEX skiplock.finished_jobs_tags_idx, skiplock.finished_jobs_payload_idx';
const SCHEMA: Record<Variant, string> = {
  A: DROP_ALL,
  B: 'SELECT 1',
  C: 'CREATE INDEX job_tags_tags_idx ON skiplock.job_tags USING gin (tags)',
  D: 'CREATE INDEX jobs_payload_idx ON skiplock.jobs USING gin (payload jsonb_path_ops)',
};

function job(variant: Variant, n: number): EnqueueInput {
  return {
    queue: 'work',
    payload: { customer: n % 1000, region: n % 2 === 0 ? 'eu' : 'us', n },
    ...(variant === 'A' ? {} : { tags: [`customer:${n % 1000}`, n % 2 === 0 ? 'env=prod' : 'env=test'] }),
  };
}

/** Jobs/s of the enqueue of JOBS jobs, then of CLAIMERS connections draining them. */
async function round(database: BenchDatabase, variant: Variant, meter: CpuMeter | undefined): Promise<Rates> {
  const { url } = database;
  const producer = pgDb(url, { max: 1 });
  await statementCounter(database).reset();
  let started = performance.now();
  for (let first = 0; first < JOBS; first += 1000) {
    const count = Math.min(1000, JOBS - first);
    await enqueueBatch(
      producer,
      Array.from({ length: count }, (_, i) => job(variant, first + i)),
    );
  }
  const enqueue = JOBS / ((performance.now() - started) / 1000);
  await producer.close();

  const claimers = Array.from({ length: CLAIMERS }, () => pgDb(url, { max: 1 }));
  const finished = { jobs: 0 };
  const cpuBefore = await meter?.read();
  started = performance.now();
  await Promise.all(
    claimers.map(async (db, index) => {
      // An empty claim while others hold the tenant's running slots is no end: the count is.
      while (finished.jobs < JOBS && performance.now() - started < DEADLINE_MS) {
        const jobs = await claimBatch(db, { max: 100, workerId: `tags-${index}`, leaseSeconds: 60 });
        if (jobs.length === 0) continue;
        // Read after the await: `+= await` would add to the count as it was before it.
        const { completed } = await completeMany(db, jobs);
        finished.jobs += completed.length;
      }
    }),
  );
  const drain = JOBS / ((performance.now() - started) / 1000);
  const cpuAfter = await meter?.read();
  const drainCpuMsPerJob =
    cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter.postgresMs - cpuBefore.postgresMs) / JOBS;
  await Promise.all(claimers.map((db) => db.close()));
  if (finished.jobs !== JOBS) throw new Error(`variant ${variant} finished ${finished.jobs} of ${JOBS} jobs`);
  const [enqueued, claimed, completed] = await Promise.all(
    ['skiplock.enqueue_jobs(', 'skiplock.claim_batch(', 'skiplock.complete_jobs('].map((marker) =>
      statementTime(database, marker),
    ),
  );
  const msPerJob = (time: { calls: number; meanMs: number } | undefined) =>
    time === undefined ? undefined : (time.calls * time.meanMs) / JOBS;
  const walPerJob = (time: { walBytes: number } | undefined) => (time === undefined ? undefined : time.walBytes / JOBS);
  return {
    enqueue,
    drain,
    drainCpuMsPerJob,
    claimMsPerJob: msPerJob(claimed),
    completeMsPerJob: msPerJob(completed),
    enqueueWalPerJob: walPerJob(enqueued),
    claimWalPerJob: walPerJob(claimed),
    completeWalPerJob: walPerJob(completed),
  };
}

async function main(): Promise<void> {
  const server = await startBenchServer(process.env.DATABASE_URL);
  const databases = new Map<Variant, BenchDatabase>();
  try {
    for (const variant of VARIANTS) {
      const database = await createDatabase(server, `tags_${variant.toLowerCase()}`);
      databases.set(variant, database);
      const db = pgDb(database.url, { max: 1 });
      await migrate(db, await loadMigrations()).finally(() => db.close());
      await database.probe.query(SCHEMA[variant]);
    }
    const probe = databases.get('A')!.probe;
    const version = (await probe.query<{ version: string }>('SELECT version()')).rows[0]!.version.split(' on ')[0];
    progress(`${version}; ${JOBS} jobs, ${CLAIMERS} claimers, ${ROUNDS} rounds; load ${loadavg()[0]!.toFixed(2)}`);

    // Postgres's CPU per drained job drifts far less with the machine's load than jobs/s do.
    const meter = await cpuMeter(server.adminUrl);
    const rounds: Array<Record<Variant, Rates>> = [];
    const variants = [...databases.entries()];
    for (let r = 0; r < ROUNDS; r++) {
      const order = [...variants.slice(r % VARIANTS.length), ...variants.slice(0, r % VARIANTS.length)];
      const rates = {} as Record<Variant, Rates>;
      for (const [variant, database] of order) {
        rates[variant] = await round(database, variant, meter);
        await database.probe.query('VACUUM ANALYZE skiplock.jobs');
      }
      rounds.push(rates);
      const line = (phase: 'enqueue' | 'drain') => VARIANTS.map((v) => `${v} ${rates[v][phase].toFixed(0)}`).join(' ');
      progress(
        `round ${r + 1}: enqueue ${line('enqueue')}, drain ${line('drain')} jobs/s; Postgres CPU per drained job ${VARIANTS.map((v) => `${v} ${rates[v].drainCpuMsPerJob?.toFixed(3) ?? '?'}`).join(' ')} ms; load ${loadavg()[0]!.toFixed(2)}`,
      );
    }

    const medians = Object.fromEntries(
      VARIANTS.map((v) => [
        v,
        {
          enqueue: median(rounds.map((r) => r[v].enqueue)),
          drain: median(rounds.map((r) => r[v].drain)),
          drainCpuMsPerJob: median(rounds.map((r) => r[v].drainCpuMsPerJob ?? Number.NaN)),
          claimMsPerJob: median(rounds.map((r) => r[v].claimMsPerJob ?? Number.NaN)),
          completeMsPerJob: median(rounds.map((r) => r[v].completeMsPerJob ?? Number.NaN)),
          enqueueWalPerJob: median(rounds.map((r) => r[v].enqueueWalPerJob ?? Number.NaN)),
          claimWalPerJob: median(rounds.map((r) => r[v].claimWalPerJob ?? Number.NaN)),
          completeWalPerJob: median(rounds.map((r) => r[v].completeWalPerJob ?? Number.NaN)),
        },
      ]),
    ) as Record<Variant, Rates>;
    for (const phase of ['enqueue', 'drain'] as const) {
      const ratio = (v: Variant) =>
        `${v} ${medians[v][phase].toFixed(0)} (${v}/A ${(medians[v][phase] / medians.A[phase]).toFixed(3)})`;
      console.log(
        `${phase} (median jobs/s): A ${medians.A[phase].toFixed(0)}, ${['B', 'C', 'D'].map((v) => ratio(v as Variant)).join(', ')}`,
      );
    }
    const cpu = (v: Variant) => medians[v].drainCpuMsPerJob!;
    console.log(
      `Postgres CPU per drained job (median ms): A ${cpu('A').toFixed(3)}, ${['B', 'C', 'D'].map((v) => `${v} ${cpu(v as Variant).toFixed(3)} (A/${v} ${(cpu('A') / cpu(v as Variant)).toFixed(3)})`).join(', ')}`,
    );
    for (const [label, figure] of [
      ['claim', 'claimMsPerJob'],
      ['completion', 'completeMsPerJob'],
    ] as const) {
      const ms = (v: Variant) => medians[v][figure]!;
      console.log(
        `server time in the ${label} statements per job (median ms): A ${ms('A').toFixed(4)}, ${['B', 'C', 'D'].map((v) => `${v} ${ms(v as Variant).toFixed(4)} (rate ${v}/A ${(ms('A') / ms(v as Variant)).toFixed(3)})`).join(', ')}`,
      );
    }
    for (const [label, figure] of [
      ['enqueue', 'enqueueWalPerJob'],
      ['claim', 'claimWalPerJob'],
      ['completion', 'completeWalPerJob'],
    ] as const) {
      const bytes = (v: Variant) => medians[v][figure]!;
      console.log(
        `WAL of the ${label} statements per job (median bytes): A ${bytes('A').toFixed(0)}, ${['B', 'C', 'D'].map((v) => `${v} ${bytes(v as Variant).toFixed(0)} (${v}/A ${(bytes(v as Variant) / bytes('A')).toFixed(3)})`).join(', ')}`,
      );
    }
    const file = join(tmpdir(), 'skiplock-tags.json');
    await writeFile(file, `${JSON.stringify({ version, jobs: JOBS, claimers: CLAIMERS, rounds, medians }, null, 2)}\n`);
    console.log(`JSON: ${file}`);
  } finally {
    for (const database of databases.values()) await database.drop();
    await server.stop();
  }
}

await main();
