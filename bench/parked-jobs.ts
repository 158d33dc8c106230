/**
 * `npx tsx bench/parked-jobs.ts`: what parked jobs (durable steps' sleeps,
 * event waits and waits for children) cost claims of other jobs. Two fresh
 * databases on the benchmark's server (DATABASE_URL, else an embedded
 * Postgres as `npm run bench` starts): A holds no parked job, B holds
 * PARKED_SLEEP sleeping, PARKED_EVENT event-waiting (both until a day
 * ahead) and PARKED_CHILDREN child-waiting jobs (until woken, each child
 * scheduled a day ahead), parked by the engine's own statements
 * (bench/parked-seed.ts), half in the tenants and queue the measured jobs
 * use, half in other tenants. Then, one client per database, in rounds that
 * alternate the order (AB, BA, ...):
 *
 * - single: a job enqueued, claimed alone (claimBatch of 1), completed; timed: the claim and the completion;
 * - backlog: BACKLOG jobs over 4 tenants, claimed 10 at a time to the end, each claim completed;
 * - empty: a claim that finds nothing (an idle worker's poll);
 * - next due: the Worker's next-due reading (src/engine/next-due.ts).
 *
 * Prints the median and p99 of each per condition, the ratio B / A, and
 * each round's medians (the run-to-run spread); JSON to
 * $TMPDIR/skiplock-parked-jobs-<PARKED_AS>[-fix].json. Options:
 *
 * - PARKED_AS=delayed: B holds as many plain delayed jobs (a day ahead, no step rows) instead;
 * - FIX=a.sql,b.sql: SQL applied to both databases after the migrations, a candidate change
 *   (bench/parked-fix-claim.sql, bench/parked-fix-state.sql);
 * - DIAGNOSE=1: pg_stat_statements (nested statements) of claims and completions, and
 *   auto_explain plans of a claim, an empty claim, a completion and the next-due
 *   reading, in each database (bench/parked-diagnostics.ts);
 * - ROUNDS, SINGLE, BACKLOG, EMPTY, NEXT_DUE, PARKED_SLEEP, PARKED_EVENT, PARKED_CHILDREN: sizes.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgDb } from '../src/db/pg';
import type { SessionDb } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueue, enqueueBatch, type EnqueueInput } from '../src/engine/enqueue';
import { nextDueAt } from '../src/engine/next-due';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { diagnose } from './parked-diagnostics';
import { parkedInventory, parkJobs } from './parked-seed';
import { createDatabase, startBenchServer, type BenchDatabase } from './postgres';
import { progress } from './progress';
import { median, percentile } from './stats';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const PARKED_SLEEP = env('PARKED_SLEEP', 5_000);
const PARKED_EVENT = env('PARKED_EVENT', 5_000);
const PARKED_CHILDREN = env('PARKED_CHILDREN', 2_000);
const ROUNDS = env('ROUNDS', 4);
const SINGLE = env('SINGLE', 500);
const BACKLOG = env('BACKLOG', 10_000);
const EMPTY = env('EMPTY', 200);
const NEXT_DUE = env('NEXT_DUE', 200);
const WARM_UP = 100;
/** `steps` parks jobs by the engine's step statements; `delayed` only enqueues as many jobs (and children) a day ahead, no step rows. */
const PARKED_AS = process.env.PARKED_AS ?? 'steps';
/** SQL files (comma-separated) applied to both databases after the migrations: candidate fixes to measure. */
const FIX = process.env.FIX;

const QUEUE = 'work';
const TYPE = 'work';
const TENANTS = ['acme', 'globex', 'initech', 'umbrella'];
/** Tenants with parked jobs only, sorting before and after the measured ones in the waiting index. */
const OTHER_TENANTS = [0, 1, 2, 3, 4].flatMap((n) => [`aaa-parked-${n}`, `zzz-parked-${n}`]);
const WORKER = 'bench-claimer';

type Scenario =
  | 'single claim'
  | 'single completion'
  | 'backlog claim of 10'
  | 'backlog completion'
  | 'empty claim'
  | 'next due';
const SCENARIOS: Scenario[] = [
  'single claim',
  'single completion',
  'backlog claim of 10',
  'backlog completion',
  'empty claim',
  'next due',
];
type Samples = Record<Scenario, number[]>;
const emptySamples = (): Samples => Object.fromEntries(SCENARIOS.map((s) => [s, []])) as unknown as Samples;

interface Condition {
  label: 'A (no parked jobs)' | 'B (parked jobs)';
  database: BenchDatabase;
  /** The measuring client: one connection, kept, its statements prepared (as a worker's). */
  db: SessionDb;
  samples: Samples;
  rounds: Samples[];
  nextDue?: string;
}

async function timed<T>(into: number[], work: () => Promise<T>): Promise<T> {
  const start = performance.now();
  const result = await work();
  into.push(performance.now() - start);
  return result;
}

function job(n: number, tenant: string): EnqueueInput {
  return { queue: QUEUE, type: TYPE, tenant, payload: { n, text: 'a job claimed beside parked ones' } };
}

async function round(condition: Condition, seed: number): Promise<Samples> {
  const { db } = condition;
  const samples = emptySamples();
  for (let i = 0; i < SINGLE; i++) {
    await enqueue(db, job(seed + i, 'acme'));
    const claimed = await timed(samples['single claim'], () =>
      claimBatch(db, { max: 1, workerId: WORKER, types: [TYPE] }),
    );
    if (claimed.length !== 1) throw new Error(`${condition.label}: a single claim took ${claimed.length} jobs`);
    await timed(samples['single completion'], () => completeMany(db, claimed));
  }
  for (let start = 0; start < BACKLOG; start += 1000) {
    const size = Math.min(1000, BACKLOG - start);
    await enqueueBatch(
      db,
      Array.from({ length: size }, (_, i) => job(seed + SINGLE + start + i, TENANTS[(start + i) % TENANTS.length]!)),
    );
  }
  let taken = 0;
  for (;;) {
    const claimed = await timed(samples['backlog claim of 10'], () =>
      claimBatch(db, { max: 10, workerId: WORKER, types: [TYPE] }),
    );
    if (claimed.length === 0) {
      samples['backlog claim of 10'].pop();
      break;
    }
    taken += claimed.length;
    await timed(samples['backlog completion'], () => completeMany(db, claimed));
  }
  if (taken !== BACKLOG) throw new Error(`${condition.label}: the backlog gave ${taken} of ${BACKLOG} jobs`);
  for (let i = 0; i < EMPTY; i++) {
    const claimed = await timed(samples['empty claim'], () =>
      claimBatch(db, { max: 1, workerId: WORKER, types: [TYPE] }),
    );
    if (claimed.length !== 0) throw new Error(`${condition.label}: an empty claim took ${claimed.length} jobs`);
  }
  for (let i = 0; i < NEXT_DUE; i++) {
    const due = await timed(samples['next due'], () => nextDueAt(db, { types: [TYPE], retentionSeconds: 7 * 86_400 }));
    condition.nextDue = due.toISOString();
  }
  return samples;
}

async function open(database: BenchDatabase, label: Condition['label']): Promise<Condition> {
  const setup = pgDb(database.url, { max: 1 });
  await migrate(setup, await loadMigrations());
  // A candidate change to the schema, tried on both databases alike (never a migration).
  for (const file of FIX?.split(',') ?? []) await setup.query({ text: await readFile(file, 'utf8'), params: [] });
  await setup.close();
  return { label, database, db: pgDb(database.url, { max: 1, idleTimeoutMs: 0 }), samples: emptySamples(), rounds: [] };
}

const halves = (count: number) => [Math.ceil(count / 2), Math.floor(count / 2)] as const;

/** As many waiting rows as parking leaves, in the same tenants and queues, but plain delayed jobs: what the claim pays for any job a day ahead. */
async function seedDelayed(db: SessionDb): Promise<void> {
  const parents = PARKED_SLEEP + PARKED_EVENT + PARKED_CHILDREN;
  const [same, other] = halves(parents);
  const inputs: EnqueueInput[] = [
    ...Array.from({ length: same }, (_, i) => ({ ...job(-i, TENANTS[i % TENANTS.length]!), delaySeconds: 86_400 })),
    ...Array.from({ length: other }, (_, i) => ({
      ...job(-i, OTHER_TENANTS[i % OTHER_TENANTS.length]!),
      delaySeconds: 86_400,
    })),
    ...Array.from({ length: PARKED_CHILDREN }, (_, i) => ({
      queue: 'children',
      type: 'child',
      tenant: (i % 2 === 0 ? TENANTS : OTHER_TENANTS)[i % 4]!,
      delaySeconds: 86_400,
    })),
  ];
  for (let start = 0; start < inputs.length; start += 1000) await enqueueBatch(db, inputs.slice(start, start + 1000));
  progress(`  delayed ${parents} jobs (${same} in the measured tenants) and ${PARKED_CHILDREN} children, no steps`);
}

async function seedParked(condition: Condition): Promise<void> {
  const db = pgDb(condition.database.url, { max: 1 });
  const until = new Date(Date.now() + 86_400_000);
  try {
    if (PARKED_AS === 'delayed') {
      await seedDelayed(db);
      progress(`  B holds ${JSON.stringify(await parkedInventory(db))}`);
      return;
    }
    let offset = 0;
    for (const [kind, count] of [
      ['sleep', PARKED_SLEEP],
      ['event', PARKED_EVENT],
      ['children', PARKED_CHILDREN],
    ] as const) {
      const [same, other] = halves(count);
      for (const [tenants, n] of [
        [TENANTS, same],
        [OTHER_TENANTS, other],
      ] as const) {
        await parkJobs(db, { kind, count: n, tenants, queue: QUEUE, type: TYPE, until }, offset);
        offset += n;
      }
      progress(
        `  parked ${count} (${kind}): ${same} in the measured tenants, ${other} in ${OTHER_TENANTS.length} others`,
      );
    }
    progress(`  B holds ${JSON.stringify(await parkedInventory(db))}`);
  } finally {
    await db.close();
  }
}

function describe(values: readonly number[]) {
  return {
    n: values.length,
    median: median(values),
    p99: percentile(values, 0.99),
    mean: values.reduce((a, b) => a + b, 0) / values.length,
  };
}

const ms = (value: number) => (value >= 10 ? value.toFixed(1) : value.toFixed(3));

async function main(): Promise<void> {
  const loadStart = loadavg();
  const server = await startBenchServer(process.env.DATABASE_URL);
  const conditions: Condition[] = [];
  try {
    const [version] = await (async () => {
      const db = pgDb(server.adminUrl, { max: 1 });
      try {
        return (await db.query<{ version: string }>({ text: 'SELECT version()', params: [] })).map((r) => r.version);
      } finally {
        await db.close();
      }
    })();
    progress(
      `${version?.split(' on ')[0]} (${server.origin}); B parked as ${PARKED_AS}${FIX ? `; fix ${FIX}` : ''}; load ${loadStart.map((l) => l.toFixed(2)).join(' ')}`,
    );
    const a = await open(await createDatabase(server, 'parked_a'), 'A (no parked jobs)');
    const b = await open(await createDatabase(server, 'parked_b'), 'B (parked jobs)');
    conditions.push(a, b);
    progress(`parking ${PARKED_SLEEP + PARKED_EVENT + PARKED_CHILDREN} jobs in B`);
    await seedParked(b);
    for (const condition of conditions) {
      await condition.database.probe.query('VACUUM ANALYZE');
      for (let i = 0; i < WARM_UP; i++) {
        await enqueue(condition.db, job(-1 - i, 'acme'));
        await completeMany(condition.db, await claimBatch(condition.db, { max: 1, workerId: WORKER, types: [TYPE] }));
      }
    }
    let seed = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? [a, b] : [b, a];
      for (const condition of order) {
        const samples = await round(condition, seed);
        seed += SINGLE + BACKLOG;
        condition.rounds.push(samples);
        for (const scenario of SCENARIOS) condition.samples[scenario].push(...samples[scenario]);
        progress(
          `round ${r + 1}/${ROUNDS} ${condition.label}: ` +
            SCENARIOS.map((s) => `${s} ${ms(median(samples[s]))}`).join(', ') +
            ` ms (medians); load ${loadavg()[0]!.toFixed(2)}`,
        );
      }
    }
    const loadEnd = loadavg();

    const report = SCENARIOS.map((scenario) => {
      const [withoutParked, withParked] = [describe(a.samples[scenario]), describe(b.samples[scenario])];
      const roundRatios = a.rounds.map((rA, i) => median(b.rounds[i]![scenario]) / median(rA[scenario]));
      return {
        scenario,
        A: withoutParked,
        B: withParked,
        ratioMedian: withParked.median / withoutParked.median,
        ratioP99: withParked.p99 / withoutParked.p99,
        roundMediansA: a.rounds.map((s) => median(s[scenario])),
        roundMediansB: b.rounds.map((s) => median(s[scenario])),
        roundRatios,
      };
    });
    console.log(
      '\nscenario                 | A median | A p99   | B median | B p99   | B/A median | B/A p99 | per-round B/A medians',
    );
    for (const row of report) {
      console.log(
        `${row.scenario.padEnd(24)} | ${ms(row.A.median).padStart(8)} | ${ms(row.A.p99).padStart(7)} | ${ms(row.B.median).padStart(8)} | ${ms(row.B.p99).padStart(7)} | ${row.ratioMedian.toFixed(2).padStart(10)} | ${row.ratioP99.toFixed(2).padStart(7)} | ${row.roundRatios.map((x) => x.toFixed(2)).join(' ')}`,
      );
    }
    console.log(`next due reads: A ${a.nextDue}, B ${b.nextDue}`);
    console.log(
      `load average: start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, end ${loadEnd.map((l) => l.toFixed(2)).join(' ')}`,
    );

    const file = join(tmpdir(), `skiplock-parked-jobs-${PARKED_AS}${FIX ? '-fix' : ''}.json`);
    await writeFile(
      file,
      JSON.stringify(
        {
          postgres: version,
          origin: server.origin,
          parkedAs: PARKED_AS,
          fix: FIX ?? null,
          parked: { sleeping: PARKED_SLEEP, event: PARKED_EVENT, children: PARKED_CHILDREN },
          sizes: { rounds: ROUNDS, single: SINGLE, backlog: BACKLOG, empty: EMPTY, nextDue: NEXT_DUE },
          loadAverage: { start: loadStart, end: loadEnd },
          nextDue: { A: a.nextDue, B: b.nextDue },
          report,
        },
        null,
        2,
      ),
    );
    progress(`written ${file}`);

    if (process.env.DIAGNOSE === '1') {
      for (const condition of conditions)
        await diagnose(condition.database, condition.label, { queue: QUEUE, type: TYPE, tenants: TENANTS });
    }
  } finally {
    for (const condition of conditions) {
      await condition.db.close();
      await condition.database.drop();
    }
    await server.stop();
  }
}

await main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
