/**
 * `npm run bench:dead-letter`: what the row trigger
 * finished_jobs_to_dead_letter_queue (skiplock.to_dead_letter_queue,
 * migration 0012) costs the statements that end jobs. One fresh database on
 * the benchmark's server (DATABASE_URL, else an embedded Postgres); one
 * client ends batches of 1 and 100 jobs, by completing them (completeMany,
 * the hot path) and by failing them for good (failMany), in each of these
 * states, in rounds that rotate their order:
 *
 * - off: the trigger disabled (what ending a job cost before migration 0012);
 * - on: enabled, the queue without a dead-letter queue;
 * - dead-letter queue: the queue names one, so each failure moves its job there.
 *
 * Only the ending statement is timed (the enqueue and the claim are not).
 */
import { loadavg } from 'node:os';
import { pgDb } from '../src/db/pg';
import type { SessionDb } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueueBatch } from '../src/engine/enqueue';
import { failMany } from '../src/engine/fail';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { createDatabase, startBenchServer } from './postgres';
import { progress } from './progress';
import { median } from './stats';

const ROUNDS = Number(process.env.ROUNDS ?? 4);
const BATCHES: ReadonlyArray<[number, number]> = [
  [1, 200],
  [100, 20],
];
const STATES = ['off', 'on', 'dead-letter queue'] as const;
type State = (typeof STATES)[number];
const ENDINGS = ['complete', 'fail for good'] as const;
type Ending = (typeof ENDINGS)[number];

const sql = (db: SessionDb, text: string) => db.query({ text, params: [] });

async function enter(db: SessionDb, state: State): Promise<void> {
  await sql(db, 'ALTER TABLE skiplock.finished_jobs ENABLE TRIGGER finished_jobs_to_dead_letter_queue');
  await sql(db, 'DELETE FROM skiplock.queues');
  // The moved jobs would otherwise pile up in the queue the claims read.
  await sql(db, "DELETE FROM skiplock.jobs WHERE queue = 'work-dead'");
  if (state === 'off') {
    await sql(db, 'ALTER TABLE skiplock.finished_jobs DISABLE TRIGGER finished_jobs_to_dead_letter_queue');
  }
  if (state === 'dead-letter queue') {
    await sql(db, "INSERT INTO skiplock.queues (name, dead_letter_queue) VALUES ('work', 'work-dead')");
  }
}

async function endings(db: SessionDb, ending: Ending, size: number, count: number, into?: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    await enqueueBatch(
      db,
      Array.from({ length: size }, (_, n) => ({ queue: 'work', payload: { n } })),
    );
    const claimed = await claimBatch(db, { max: size, workerId: 'bench', queues: ['work'] });
    if (claimed.length !== size) throw new Error(`claimed ${claimed.length} of ${size}`);
    const start = performance.now();
    if (ending === 'complete') await completeMany(db, claimed);
    else
      await failMany(
        db,
        claimed.map((job) => ({ ...job, error: { message: 'no' }, forGood: true })),
      );
    into?.push((performance.now() - start) * 1000);
  }
}

async function main(): Promise<void> {
  const loadStart = loadavg();
  const server = await startBenchServer(process.env.DATABASE_URL);
  const database = await createDatabase(server, 'dead_letter');
  const db = pgDb(database.url, { max: 1, idleTimeoutMs: 0 });
  try {
    await migrate(db, await loadMigrations());
    const samples = new Map<string, number[]>();
    const key = (state: State, ending: Ending, size: number) => `${state}|${ending}|${size}`;
    for (let round = 0; round < ROUNDS; round++) {
      for (const state of STATES.map((_, i) => STATES[(i + round) % STATES.length]!)) {
        await enter(db, state);
        await endings(db, 'complete', 1, 20);
        for (const ending of ENDINGS) {
          for (const [size, count] of BATCHES) {
            const values = samples.get(key(state, ending, size)) ?? [];
            await endings(db, ending, size, count, values);
            samples.set(key(state, ending, size), values);
          }
        }
        progress(`round ${round + 1}/${ROUNDS} ${state}; load ${loadavg()[0]!.toFixed(2)}`);
      }
    }
    console.log('\nending        | batch | state             | median µs | vs off');
    for (const ending of ENDINGS) {
      for (const [size] of BATCHES) {
        const off = median(samples.get(key('off', ending, size))!);
        for (const state of STATES) {
          const value = median(samples.get(key(state, ending, size))!);
          console.log(
            `${ending.padEnd(13)} | ${String(size).padStart(5)} | ${state.padEnd(17)} | ${value.toFixed(0).padStart(9)} | ${(value / off).toFixed(3)}`,
          );
        }
      }
    }
    const loadEnd = loadavg();
    console.log(
      `load average: start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, end ${loadEnd.map((l) => l.toFixed(2)).join(' ')}`,
    );
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
