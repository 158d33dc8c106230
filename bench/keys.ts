/**
 * `npm run bench:keys`: what concurrency and rate keys cost, on the
 * benchmark's server (DATABASE_URL, else an embedded Postgres as `npm run
 * bench` starts).
 *
 * - burn-down: JOBS jobs over 4 tenants, enqueued 1,000 a statement, then
 *   drained by CLAIMERS connections (claims of 100, each completed), in A
 *   without keys, in B with a concurrency key each, among KEYS distinct
 *   keys of KEY_LIMIT slots, and in C with a rate key each, among KEYS keys
 *   of RATE_LIMIT starts a second (high enough not to slow the drain: what
 *   is measured is the counting); the order turns each round. Jobs/s of
 *   the enqueues and of the drain, B/A and C/A per round.
 * - deep: one connection claims one job and completes it, SINGLE times, in
 *   A with WAITING plain jobs waiting (replenished) and in B with
 *   HELD_KEYS keys of one slot holding DEEP jobs between them (one waiting
 *   per key, the rest held). The claim's and the completion's latency, B/A.
 *   The same series as workload (k2) of `npm run bench` (bench/held-keys.ts).
 *
 * Prints the figures and the spread over rounds; JSON to $TMPDIR/skiplock-keys.json.
 */
import { writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgDb } from '../src/db/pg';
import type { Db } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueueBatch, type EnqueueInput } from '../src/engine/enqueue';
import { heldKeysRound, jobStates, migratedDatabase, seedHeld, seedPlain, type SingleClaims } from './held-keys';
import { startBenchServer, type BenchDatabase } from './postgres';
import { progress } from './progress';
import { median, percentile } from './stats';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const JOBS = env('JOBS', 20_000);
const KEYS = env('KEYS', 1_000);
const KEY_LIMIT = env('KEY_LIMIT', 2);
const CLAIMERS = env('CLAIMERS', 4);
const ROUNDS = env('ROUNDS', 4);
const SINGLE = env('SINGLE', 1_000);
const WAITING = env('WAITING', 1_000);
const HELD_KEYS = env('HELD_KEYS', 10_000);
const RATE_LIMIT = env('RATE_LIMIT', 10_000);
const DEEP = env('DEEP', 1_000_000);
const TENANTS = ['acme', 'globex', 'initech', 'umbrella'];

type Variant = 'A' | 'B' | 'C';

/** The key fields of job n in a variant: none (A), a concurrency key (B), a rate key (C). */
function keysOf(variant: Variant, n: number, round: number): Partial<EnqueueInput> {
  const key = `key-${(n * 7919 + round) % KEYS}`;
  if (variant === 'B') return { concurrencyKey: key, concurrencyLimit: KEY_LIMIT };
  if (variant === 'C') return { rateKey: key, rateLimit: RATE_LIMIT, ratePeriodSeconds: 1 };
  return {};
}

/** One burn-down round: enqueue JOBS (keyed or not), drain them; jobs/s of each phase. */
async function burnDown(url: string, variant: Variant, round: number): Promise<{ enqueue: number; drain: number }> {
  const db = pgDb(url, { max: 1 });
  const jobs: EnqueueInput[] = Array.from({ length: JOBS }, (_, n) => ({
    queue: 'work',
    tenant: TENANTS[n % TENANTS.length]!,
    payload: n,
    ...keysOf(variant, n, round),
  }));
  let started = performance.now();
  for (let i = 0; i < jobs.length; i += 1000) await enqueueBatch(db, jobs.slice(i, i + 1000));
  const enqueueSeconds = (performance.now() - started) / 1000;
  await db.close();

  const claimers: Db[] = Array.from({ length: CLAIMERS }, () => pgDb(url, { max: 1 }));
  let done = 0;
  started = performance.now();
  await Promise.all(
    claimers.map(async (claimer, index) => {
      let empty = 0;
      while (done < JOBS && empty < 1000) {
        const claimed = await claimBatch(claimer, { max: 100, workerId: `bench-${index}`, leaseSeconds: 60 });
        if (claimed.length === 0) {
          empty += 1;
          continue;
        }
        empty = 0;
        // Read after the await: `done += await ...` would add to a stale value.
        const { completed } = await completeMany(claimer, claimed);
        done += completed.length;
      }
    }),
  );
  const drainSeconds = (performance.now() - started) / 1000;
  await Promise.all(claimers.map((claimer) => claimer.close()));
  if (done !== JOBS) throw new Error(`burn-down finished ${done} of ${JOBS} jobs`);
  return { enqueue: JOBS / enqueueSeconds, drain: JOBS / drainSeconds };
}

const fixed = (value: number, digits = 2) => value.toFixed(digits);

async function main(): Promise<void> {
  const loadStart = loadavg();
  const server = await startBenchServer(process.env.DATABASE_URL);
  const databases: BenchDatabase[] = [];
  try {
    const a = await migratedDatabase(server, 'keys_a');
    const b = await migratedDatabase(server, 'keys_b');
    const c = await migratedDatabase(server, 'keys_c');
    databases.push(a, b, c);
    const version = (await a.probe.query<{ version: string }>('SELECT version()')).rows[0]!.version.split(' on ')[0];
    progress(`${version} (${server.origin}); load ${loadStart.map((l) => fixed(l)).join(' ')}`);

    const burn: Array<Record<Variant, { enqueue: number; drain: number }>> = [];
    const variants: Array<[Variant, BenchDatabase]> = [
      ['A', a],
      ['B', b],
      ['C', c],
    ];
    for (let r = 0; r < ROUNDS; r++) {
      // Each variant goes first, second and third in turn.
      const order = [...variants.slice(r % 3), ...variants.slice(0, r % 3)];
      const result = {} as (typeof burn)[number];
      for (const [label, database] of order) {
        result[label] = await burnDown(database.url, label, r);
        await database.probe.query('VACUUM ANALYZE skiplock.jobs');
      }
      burn.push(result);
      progress(
        `burn-down round ${r + 1}/${ROUNDS}: enqueue A ${fixed(result.A.enqueue, 0)} B ${fixed(result.B.enqueue, 0)} ` +
          `C ${fixed(result.C.enqueue, 0)} jobs/s, drain A ${fixed(result.A.drain, 0)} B ${fixed(result.B.drain, 0)} ` +
          `C ${fixed(result.C.drain, 0)} jobs/s; load ${fixed(loadavg()[0]!)}`,
      );
    }

    progress(`deep: A ${WAITING} waiting; B ${DEEP} jobs over ${HELD_KEYS} keys of one slot (seeding)`);
    await seedPlain(a, WAITING);
    await seedHeld(b, HELD_KEYS, DEEP);
    const held = Object.entries(await jobStates(b));
    progress(`B holds ${held.map(([state, count]) => `${count} ${state}`).join(', ')}`);
    const deepA: SingleClaims = { claim: [], complete: [] };
    const deepB: SingleClaims = { claim: [], complete: [] };
    const deepRounds: Array<{ claimA: number; claimB: number }> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const round = await heldKeysRound(a, b, r, SINGLE);
      const medians = { A: median(round.A.claim), B: median(round.B.claim) };
      for (const [into, samples] of [
        [deepA, round.A],
        [deepB, round.B],
      ] as const) {
        into.claim.push(...samples.claim);
        into.complete.push(...samples.complete);
      }
      deepRounds.push({ claimA: medians.A, claimB: medians.B });
      progress(`deep round ${r + 1}/${ROUNDS}: claim median A ${fixed(medians.A, 3)} B ${fixed(medians.B, 3)} ms`);
    }
    const loadEnd = loadavg();

    const ratio = (pick: (row: (typeof burn)[number]) => [number, number]) =>
      burn.map((row) => pick(row)[1] / pick(row)[0]);
    const enqueueRatios = ratio((row) => [row.A.enqueue, row.B.enqueue]);
    const drainRatios = ratio((row) => [row.A.drain, row.B.drain]);
    const rateEnqueueRatios = ratio((row) => [row.A.enqueue, row.C.enqueue]);
    const rateDrainRatios = ratio((row) => [row.A.drain, row.C.drain]);
    const claimRatio = median(deepB.claim) / median(deepA.claim);
    console.log(
      `\nburn-down: ${JOBS} jobs, ${TENANTS.length} tenants, ${CLAIMERS} claimers; B: ${KEYS} keys of ${KEY_LIMIT} slots; ` +
        `C: ${KEYS} rate keys of ${RATE_LIMIT} starts/s`,
    );
    console.log(
      `  enqueue jobs/s  A ${fixed(median(burn.map((row) => row.A.enqueue)), 0)}  B ${fixed(median(burn.map((row) => row.B.enqueue)), 0)}  B/A per round ${enqueueRatios.map((x) => fixed(x)).join(' ')}`,
    );
    console.log(
      `  drain jobs/s    A ${fixed(median(burn.map((row) => row.A.drain)), 0)}  B ${fixed(median(burn.map((row) => row.B.drain)), 0)}  B/A per round ${drainRatios.map((x) => fixed(x)).join(' ')}  (target >= 0.80: ${median(drainRatios) >= 0.8 ? 'met' : 'not met'})`,
    );
    console.log(
      `  rate keys: enqueue C ${fixed(median(burn.map((row) => row.C.enqueue)), 0)} jobs/s, C/A per round ${rateEnqueueRatios.map((x) => fixed(x)).join(' ')}; drain C ${fixed(median(burn.map((row) => row.C.drain)), 0)} jobs/s, C/A per round ${rateDrainRatios.map((x) => fixed(x)).join(' ')}  (target >= 0.80: ${median(rateDrainRatios) >= 0.8 ? 'met' : 'not met'})`,
    );
    console.log(`deep: A ${WAITING} waiting; B ${DEEP} jobs over ${HELD_KEYS} keys (one waiting each, the rest held)`);
    console.log(
      `  claim ms        A median ${fixed(median(deepA.claim), 3)} p99 ${fixed(percentile(deepA.claim, 0.99), 3)}  B median ${fixed(median(deepB.claim), 3)} p99 ${fixed(percentile(deepB.claim, 0.99), 3)}  B/A ${fixed(claimRatio)} (per round ${deepRounds.map((row) => fixed(row.claimB / row.claimA)).join(' ')}; target <= 1.50: ${claimRatio <= 1.5 ? 'met' : 'not met'})`,
    );
    console.log(
      `  complete ms     A median ${fixed(median(deepA.complete), 3)}  B median ${fixed(median(deepB.complete), 3)} (B's gives the key's next job its turn)`,
    );
    console.log(
      `load average: start ${loadStart.map((l) => fixed(l)).join(' ')}, end ${loadEnd.map((l) => fixed(l)).join(' ')}`,
    );

    const file = join(tmpdir(), 'skiplock-keys.json');
    await writeFile(
      file,
      JSON.stringify(
        {
          postgres: version,
          origin: server.origin,
          sizes: { JOBS, KEYS, KEY_LIMIT, RATE_LIMIT, CLAIMERS, ROUNDS, SINGLE, WAITING, HELD_KEYS, DEEP },
          loadAverage: { start: loadStart, end: loadEnd },
          burn,
          deep: { A: deepA, B: deepB, rounds: deepRounds },
        },
        null,
        2,
      ),
    );
    progress(`written ${file}`);
  } finally {
    for (const database of databases) await database.drop();
    await server.stop();
  }
}

await main();
