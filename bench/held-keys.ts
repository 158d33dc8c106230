/**
 * The claim beside held keys, as `npm run bench:keys` (its deep scenario)
 * and workload (k2) of `npm run bench` measure it: one connection claims
 * one job and completes it, again and again, in A with a short queue of
 * plain jobs (topped up after each) and in B with a deep backlog of keyed
 * jobs, one with a turn per key and the rest held, seeded in set-based SQL.
 */
import { pgDb } from '../src/db/pg';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueue, enqueueBatch } from '../src/engine/enqueue';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { createDatabase, type BenchDatabase, type BenchServer } from './postgres';

/** The tenant and queue of every job both scenarios hold. */
const TENANT = 'acme';
const QUEUE = 'work';

/** A new database with skiplock's schema. */
export async function migratedDatabase(server: BenchServer, label: string): Promise<BenchDatabase> {
  const database = await createDatabase(server, label);
  const db = pgDb(database.url, { max: 1 });
  try {
    await migrate(db, await loadMigrations());
  } finally {
    await db.close();
  }
  return database;
}

/** A's queue: `waiting` plain jobs, analyzed. */
export async function seedPlain(database: BenchDatabase, waiting: number): Promise<void> {
  const db = pgDb(database.url, { max: 1 });
  try {
    await enqueueBatch(
      db,
      Array.from({ length: waiting }, (_, n) => ({ queue: QUEUE, tenant: TENANT, payload: n })),
    );
  } finally {
    await db.close();
  }
  await database.probe.query('VACUUM ANALYZE');
}

/**
 * B's backlog: `keys` keys of one slot with `jobs` jobs between them, each
 * key's oldest job queued with the slot and the rest held, written straight
 * into the tables (as enqueue leaves them) ten turns of every key a
 * statement, then vacuumed and analyzed. Returns the jobs written: `jobs`
 * rounded up to whole turns of every key.
 */
export async function seedHeld(database: BenchDatabase, keys: number, jobs: number): Promise<number> {
  const perKey = Math.ceil(jobs / keys);
  await database.probe.query('INSERT INTO skiplock.tenants (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [TENANT]);
  await database.probe.query(
    `INSERT INTO skiplock.concurrency_keys (tenant, key, ordered, slots, on_failure, taken)
     SELECT $1, 'key-' || k, false, 1, 'continue', 1 FROM generate_series(1, $2::integer) k`,
    [TENANT, keys],
  );
  // Ids in (turn, key) order, so each key's first job is its oldest.
  for (let turn = 1; turn <= perKey; turn += 10) {
    await database.probe.query(
      `WITH jobs AS (
         SELECT skiplock.uuid_v7(timestamptz '2026-01-01' + make_interval(secs => n / 1000.0), k) AS id, k, n
         FROM generate_series($1::integer, $2::integer) n, generate_series(1, $3::integer) k),
       keyed AS (
         INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure, slot)
         SELECT id, $4, 'key-' || k, false, 1, 'continue', CASE WHEN n = 1 THEN 'taken' ELSE 'waiting' END FROM jobs)
       INSERT INTO skiplock.jobs (id, queue, type, tenant, state, run_at, payload)
       SELECT id, $5, $5, $4, CASE WHEN n = 1 THEN 'queued' ELSE 'held' END, now(), to_jsonb(n) FROM jobs`,
      [turn, Math.min(perKey, turn + 9), keys, TENANT, QUEUE],
    );
  }
  await database.probe.query('VACUUM ANALYZE');
  return perKey * keys;
}

export interface SingleClaims {
  /** Each claim's latency, ms. */
  claim: number[];
  /** Each completion's latency, ms (in B it gives the key's next job its turn). */
  complete: number[];
}

/** `count` claims of one job, each completed; `topUp` enqueues a plain job after each, untimed, so A's depth stays put. */
export async function singleClaims(url: string, count: number, topUp: boolean): Promise<SingleClaims> {
  const db = pgDb(url, { max: 1, idleTimeoutMs: 0 });
  const claim: number[] = [];
  const complete: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      let started = performance.now();
      const jobs = await claimBatch(db, { max: 1, workerId: 'bench', leaseSeconds: 60 });
      claim.push(performance.now() - started);
      if (jobs.length !== 1) throw new Error(`claim ${i + 1} of ${count} found no job: the queue ran dry`);
      started = performance.now();
      await completeMany(db, jobs);
      complete.push(performance.now() - started);
      if (topUp) await enqueue(db, { queue: QUEUE, tenant: TENANT, payload: i });
    }
  } finally {
    await db.close();
  }
  return { claim, complete };
}

/** One round: `count` single claims in A and in B, A first in even rounds and B first in odd ones. */
export async function heldKeysRound(
  a: BenchDatabase,
  b: BenchDatabase,
  round: number,
  count: number,
): Promise<{ A: SingleClaims; B: SingleClaims }> {
  if (round % 2 === 0) {
    const A = await singleClaims(a.url, count, true);
    return { A, B: await singleClaims(b.url, count, false) };
  }
  const B = await singleClaims(b.url, count, false);
  return { A: await singleClaims(a.url, count, true), B };
}

/** The jobs of a scenario's database by state (held and queued are what B's gate checks). */
export async function jobStates(database: BenchDatabase): Promise<Record<string, number>> {
  const { rows } = await database.probe.query<{ state: string; count: number }>(
    'SELECT state, count(*)::int AS count FROM skiplock.jobs GROUP BY 1 ORDER BY 1',
  );
  return Object.fromEntries(rows.map((row) => [row.state, row.count]));
}
