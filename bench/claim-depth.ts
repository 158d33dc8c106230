/**
 * Claim latency against queue depth and retention: how long one claim of 10
 * plus its batched completion takes with 1,000 jobs waiting, and again with
 * 1,000,000 waiting and 1,000,000 finished jobs kept. Also counts the
 * database round trips per operation. A measurement script, not a test:
 *
 *   npx tsx bench/claim-depth.ts            (embedded Postgres)
 *   DATABASE_URL=postgres://... npx tsx bench/claim-depth.ts
 *
 * It creates and drops its own database on that server.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pgDb } from '../src/db/pg';
import type { Query, Queryable, Row } from '../src/db/types';
import { claimBatch, completeMany, enqueue, enqueueBatch } from '../src/engine';
import { startEmbeddedPostgres } from '../src/local/embedded-postgres';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';

const SAMPLES = 200;

function counting(db: Queryable): Queryable & { calls: number } {
  const wrapper = {
    calls: 0,
    query<R = Row>(query: Query): Promise<R[]> {
      wrapper.calls += 1;
      return db.query<R>(query);
    },
  };
  return wrapper;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

async function measureClaims(db: Queryable, label: string): Promise<void> {
  const claims: number[] = [];
  const completes: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const t0 = performance.now();
    const jobs = await claimBatch(db, { max: 10, workerId: 'bench' });
    const t1 = performance.now();
    await completeMany(db, jobs);
    completes.push(performance.now() - t1);
    claims.push(t1 - t0);
  }
  console.log(
    `${label}: claim(10) median ${median(claims).toFixed(2)} ms, p99 ${percentile(claims, 0.99).toFixed(2)} ms; ` +
      `complete(10) median ${median(completes).toFixed(2)} ms`,
  );
}

async function main(): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  let stop = async () => {};
  if (!adminUrl) {
    const dataDir = await mkdtemp(join(tmpdir(), 'skiplock-bench-'));
    const server = await startEmbeddedPostgres({ dataDir, port: 25_000 + Math.floor(Math.random() * 5000), persistent: false });
    adminUrl = server.url;
    stop = async () => {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    };
  }
  const name = `skiplock_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = pgDb(url.toString(), { max: 2 });
  try {
    await migrate(db, await loadMigrations());
    const [server] = await db.query<{ version: string }>({
      text: "SELECT current_setting('server_version') AS version",
      params: [],
    });
    console.log(`Postgres ${server?.version}, Node ${process.version}`);

    const probe = counting(db);
    await enqueue(probe, { queue: 'q' });
    const enqueueTrips = probe.calls;
    await enqueueBatch(probe, Array.from({ length: 1000 }, () => ({ queue: 'q' })));
    const batchTrips = probe.calls - enqueueTrips;
    const before = probe.calls;
    const claimed = await claimBatch(probe, { max: 10, workerId: 'probe' });
    const claimTrips = probe.calls - before;
    await completeMany(probe, claimed);
    const completeTrips = probe.calls - before - claimTrips;
    console.log(
      `round trips: enqueue ${enqueueTrips}, enqueue batch of 1,000 ${batchTrips}, claim batch ${claimTrips}, complete batch ${completeTrips}`,
    );

    await measureClaims(db, '~1,000 waiting');

    console.log('loading 1,000,000 waiting and 1,000,000 finished jobs ...');
    await db.query({
      text: `INSERT INTO skiplock.jobs (queue, type, state, payload)
             SELECT 'q', 'q', 'queued', jsonb_build_object('n', n) FROM generate_series(1, 1000000) n`,
      params: [],
    });
    await db.query({
      text: `INSERT INTO skiplock.jobs (queue, type, state, payload, attempts, started_at, finished_at)
             SELECT 'done', 'done', 'succeeded', jsonb_build_object('n', n), 1, now(), now()
             FROM generate_series(1, 1000000) n`,
      params: [],
    });
    await db.query({ text: 'VACUUM ANALYZE skiplock.jobs', params: [] });
    await measureClaims(db, '1,000,000 waiting + 1,000,000 finished');
  } finally {
    await db.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    await stop();
  }
}

await main();
