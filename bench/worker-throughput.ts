/**
 * `npm run bench:worker`: jobs through `npm start`'s Worker alone (its cron
 * and fast-path drains in workerd over the Neon HTTP driver and the local
 * proxy; no Node worker), on a fresh database on DATABASE_URL's server, the
 * cron fired every second. Statements are that database's transactions
 * (pg_stat_database), less the script's own progress reads.
 *
 * 1. burn-down: JOBS no-op jobs enqueued in batches of 1,000, then until all finished;
 * 2. the same with jobs that wait 50 ms (I/O-bound);
 * 3. a burst: 64 clients enqueue single no-op jobs for 20 s: enqueue rate and
 *    latency, and enqueue-to-start of the jobs.
 *
 * Prints one JSON object; docs/benchmarks.md quotes it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgDb } from '../src/db/pg';
import { percentile } from './stats';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const jobs = Number(process.env.JOBS ?? 3000);
const adminToken = 'bench-worker-admin-token-0123456789abcdef';

function databaseUrl(name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.href;
}

async function main(): Promise<void> {
  const name = `skiplock_worker_${Date.now()}`;
  const admin = pgDb(databaseUrl('postgres'), { max: 1 });
  await admin.query({ text: `CREATE DATABASE ${name}`, params: [] });
  const port = 19_000 + Math.floor(Math.random() * 1000);
  const stack = spawn('npm', ['start'], {
    env: { ...process.env, DATABASE_URL: databaseUrl(name), ADMIN_TOKEN: adminToken, PORT: String(port), DRAIN_EVERY_SECONDS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  stack.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  stack.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const api = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
  let db: ReturnType<typeof pgDb> | undefined;
  try {
    for (let waited = 0; !output.includes('Ctrl-C stops everything'); waited += 200) {
      if (waited > 120_000 || stack.exitCode !== null) throw new Error(`npm start did not come up:\n${output}`);
      await sleep(200);
    }
    db = pgDb(databaseUrl(name), { max: 1 });
    const target = db;
    let ownReads = 0;
    const transactions = async () => {
      const [row] = await admin.query<{ count: string }>({
        text: 'SELECT xact_commit + xact_rollback AS count FROM pg_stat_database WHERE datname = $1',
        params: [name],
      });
      return Number(row!.count);
    };
    const unfinished = async (queue: string) => {
      ownReads += 1;
      const [row] = await target.query<{ count: number }>({
        text: 'SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1',
        params: [queue],
      });
      return row!.count;
    };

    async function burnDown(queue: string, job: Record<string, unknown>) {
      await sleep(3000);
      ownReads = 0;
      const before = await transactions();
      const started = performance.now();
      for (let sent = 0; sent < jobs; sent += 1000) {
        const batch = Array.from({ length: Math.min(1000, jobs - sent) }, () => job);
        const response = await fetch(`${api}/v1/queues/${queue}/jobs/batch`, { method: 'POST', headers, body: JSON.stringify({ jobs: batch }) });
        if (!response.ok) throw new Error(`batch enqueue: ${response.status} ${await response.text()}`);
      }
      while ((await unfinished(queue)) > 0) await sleep(250);
      const seconds = (performance.now() - started) / 1000;
      await sleep(2000);
      const statements = (await transactions()) - before - ownReads;
      return { jobs, seconds: round(seconds), jobsPerSecond: Math.round(jobs / seconds), statementsPerJob: round(statements / jobs) };
    }

    const noop = await burnDown('bench-noop', { type: 'noop' });
    console.error('no-op', noop);
    const io = await burnDown('bench-io', { type: 'sleep', payload: { ms: 50 } });
    console.error('I/O 50 ms', io);

    // The burst: 64 clients, single enqueues, 20 s.
    await sleep(3000);
    const latencies: number[] = [];
    const ids: string[] = [];
    let failures = 0;
    const until = performance.now() + 20_000;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (performance.now() < until) {
          const sent = performance.now();
          const response = await fetch(`${api}/v1/queues/bench-burst/jobs`, { method: 'POST', headers, body: JSON.stringify({ type: 'noop' }) });
          if (response.status !== 201) failures += 1;
          else ids.push(((await response.json()) as { id: string }).id);
          latencies.push(performance.now() - sent);
        }
      }),
    );
    while ((await unfinished('bench-burst')) > 0) await sleep(250);
    const [waits] = await target.query<{ p50: number; p99: number }>({
      text: `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
             FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM skiplock.all_jobs WHERE queue = 'bench-burst') w`,
      params: [],
    });
    const burst = {
      clients: 64,
      seconds: 20,
      enqueued: ids.length,
      failed: failures,
      enqueuesPerSecond: Math.round(ids.length / 20),
      latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
      enqueueToStartMs: { p50: round(waits!.p50), p99: round(waits!.p99) },
    };
    console.log(JSON.stringify({ noop, io50ms: io, burst }, null, 2));
  } finally {
    await db?.close();
    stack.kill('SIGTERM');
    await once(stack, 'exit');
    await admin.query({ text: `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`, params: [] });
    await admin.close();
  }
}

const round = (value: number) => Math.round(value * 100) / 100;

await main();
