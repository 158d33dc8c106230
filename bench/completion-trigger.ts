/**
 * `npx tsx bench/completion-trigger.ts`: what the statement trigger
 * finished_jobs_resolve_links (skiplock.on_linked_jobs_finished, migration
 * 0004) costs a completion, the hot path. One fresh database on the
 * benchmark's server (DATABASE_URL, else an embedded Postgres); one client
 * completes batches of 1, 10, 100 and 500 jobs (completeMany, the drain's
 * group commit) in each of these states, in rounds that rotate their order:
 *
 * - off: the trigger disabled (what the queue cost before migration 0004);
 * - fast path: enabled, event_waits and job_links empty (a queue that never used steps);
 * - link history: one resolved job_links row (what any flow or invoke leaves: nothing prunes it);
 * - 5,000 event waits: jobs parked on events elsewhere in the queue.
 *
 * Only the completion statement is timed (the enqueue and the claim of its
 * jobs are not). FIX=file applies a SQL file after the migrations (a
 * candidate change, say another version of skiplock.on_linked_jobs_finished).
 * JSON to $TMPDIR/skiplock-completion-trigger.json.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgDb } from '../src/db/pg';
import type { SessionDb } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueueBatch } from '../src/engine/enqueue';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { createDatabase, startBenchServer } from './postgres';
import { progress } from './progress';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.ROUNDS ?? 4);
const FIX = process.env.FIX;
/** Batch size and how many completions of it each round times. */
const BATCHES: ReadonlyArray<[number, number]> = [
  [1, 300],
  [10, 100],
  [100, 30],
  [500, 10],
];
const STATES = ['off', 'fast path', 'link history', '5,000 event waits'] as const;
type State = (typeof STATES)[number];

const sql = (db: SessionDb, text: string) => db.query({ text, params: [] });

async function enter(db: SessionDb, state: State): Promise<void> {
  await sql(db, 'ALTER TABLE skiplock.finished_jobs ENABLE TRIGGER finished_jobs_resolve_links');
  await sql(db, 'DELETE FROM skiplock.job_links');
  await sql(db, 'DELETE FROM skiplock.event_waits');
  if (state === 'off') await sql(db, 'ALTER TABLE skiplock.finished_jobs DISABLE TRIGGER finished_jobs_resolve_links');
  if (state === 'link history') {
    await sql(
      db,
      `INSERT INTO skiplock.job_links (job_id, other_id, kind, on_failure, resolved_at)
       VALUES (gen_random_uuid(), gen_random_uuid(), 'dependency', 'fail', now())`,
    );
  }
  if (state === '5,000 event waits') {
    await sql(
      db,
      `INSERT INTO skiplock.event_waits (job_id, step_name, tenant, event, key, timeout_at)
       SELECT gen_random_uuid(), 'approval', 'default', 'order.approved', 'order-' || g, now() + interval '1 day'
       FROM generate_series(1, 5000) g`,
    );
  }
  await sql(db, 'VACUUM ANALYZE skiplock.job_links, skiplock.event_waits');
}

async function completions(db: SessionDb, size: number, count: number, into: number[] | undefined): Promise<void> {
  for (let i = 0; i < count; i++) {
    await enqueueBatch(
      db,
      Array.from({ length: size }, (_, n) => ({ queue: 'work', payload: { n, text: 'a job completed in a batch' } })),
    );
    const claimed = await claimBatch(db, { max: size, workerId: 'bench-completer', types: ['work'] });
    if (claimed.length !== size) throw new Error(`claimed ${claimed.length} of ${size}`);
    const start = performance.now();
    const { completed } = await completeMany(db, claimed);
    into?.push((performance.now() - start) * 1000);
    if (completed.length !== size) throw new Error(`completed ${completed.length} of ${size}`);
  }
}

async function main(): Promise<void> {
  const loadStart = loadavg();
  const server = await startBenchServer(process.env.DATABASE_URL);
  const database = await createDatabase(server, 'completion_trigger');
  const db = pgDb(database.url, { max: 1, idleTimeoutMs: 0 });
  try {
    await migrate(db, await loadMigrations());
    if (FIX !== undefined) await sql(db, await readFile(FIX, 'utf8'));
    progress(`completion trigger${FIX ? ` with ${FIX}` : ''}; load ${loadStart.map((l) => l.toFixed(2)).join(' ')}`);
    const samples = new Map<string, number[]>();
    const roundMedians = new Map<string, number[]>();
    const key = (state: State, size: number) => `${state}|${size}`;
    for (let round = 0; round < ROUNDS; round++) {
      const order = STATES.map((_, i) => STATES[(i + round) % STATES.length]!);
      for (const state of order) {
        await enter(db, state);
        await completions(db, 1, 20, undefined);
        for (const [size, count] of BATCHES) {
          const values: number[] = [];
          await completions(db, size, count, values);
          samples.set(key(state, size), [...(samples.get(key(state, size)) ?? []), ...values]);
          roundMedians.set(key(state, size), [...(roundMedians.get(key(state, size)) ?? []), median(values)]);
        }
        progress(`round ${round + 1}/${ROUNDS} ${state}; load ${loadavg()[0]!.toFixed(2)}`);
      }
    }
    const rows = STATES.flatMap((state) =>
      BATCHES.map(([size]) => {
        const values = samples.get(key(state, size))!;
        const off = samples.get(key('off', size))!;
        return {
          state,
          batch: size,
          n: values.length,
          medianUs: median(values),
          p99Us: percentile(values, 0.99),
          perJobUs: median(values) / size,
          ratioToOff: median(values) / median(off),
          roundMediansUs: roundMedians.get(key(state, size))!.map((v) => Math.round(v)),
        };
      }),
    );
    console.log('\nstate              | batch | median µs | p99 µs | µs/job | vs off | per-round medians µs');
    for (const row of rows) {
      console.log(
        `${row.state.padEnd(18)} | ${String(row.batch).padStart(5)} | ${row.medianUs.toFixed(0).padStart(9)} | ${row.p99Us.toFixed(0).padStart(6)} | ${row.perJobUs.toFixed(1).padStart(6)} | ${row.ratioToOff.toFixed(3).padStart(6)} | ${row.roundMediansUs.join(' ')}`,
      );
    }
    const loadEnd = loadavg();
    console.log(
      `load average: start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, end ${loadEnd.map((l) => l.toFixed(2)).join(' ')}`,
    );
    const file = join(tmpdir(), `skiplock-completion-trigger${FIX ? '-fix' : ''}.json`);
    await writeFile(
      file,
      JSON.stringify(
        { fix: FIX ?? null, rounds: ROUNDS, loadAverage: { start: loadStart, end: loadEnd }, rows },
        null,
        2,
      ),
    );
    progress(`written ${file}`);
  } finally {
    await db.close();
    await database.drop();
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
