import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgDb } from '../src/db/pg';
import type { WorkerTarget } from './worker-workloads';

/** A fresh database on DATABASE_URL's server (default the system PostgreSQL), for the scripts that measure the Worker alone. */
export interface BenchDatabase {
  url: string;
  /** The server's `postgres` database, for server-wide readings (CPU). */
  adminUrl: string;
  /** A connection of the script's own, for its reads. */
  db: WorkerTarget['db'];
  /** Transactions the database has run so far (every statement the Worker sends is one), from pg_stat_database. */
  transactions(): Promise<number>;
  drop(): Promise<void>;
}

export async function createBenchDatabase(name: string): Promise<BenchDatabase> {
  const server = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const databaseUrl = (database: string) => Object.assign(new URL(server), { pathname: `/${database}` }).href;
  const database = `skiplock_${name}_${Date.now()}`;
  const admin = pgDb(databaseUrl('postgres'), { max: 1 });
  await admin.query({ text: `CREATE DATABASE ${database}`, params: [] });
  const db = pgDb(databaseUrl(database), { max: 1 });
  return {
    url: databaseUrl(database),
    adminUrl: databaseUrl('postgres'),
    db,
    async transactions() {
      const [row] = await admin.query<{ count: string }>({
        text: 'SELECT xact_commit + xact_rollback AS count FROM pg_stat_database WHERE datname = $1',
        params: [database],
      });
      return Number(row!.count);
    },
    async drop() {
      await db.close();
      await admin.query({ text: `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`, params: [] });
      await admin.close();
    },
  };
}

/** `npm start` on a fresh database: the Worker under `wrangler dev`, its API and admin key. */
export interface WorkerStack extends WorkerTarget {
  /** Stops `npm start` and drops the database. */
  stop(): Promise<void>;
}

export const BENCH_ADMIN_TOKEN = 'bench-worker-admin-token-0123456789abcdef';

export const adminHeaders = { authorization: `Bearer ${BENCH_ADMIN_TOKEN}`, 'content-type': 'application/json' };

export async function startWorkerStack(options: { name: string; drainEverySeconds: number }): Promise<WorkerStack> {
  const database = await createBenchDatabase(options.name);
  const port = 18_000 + Math.floor(Math.random() * 2000);
  const stack = spawn('npm', ['start'], {
    env: {
      ...process.env,
      DATABASE_URL: database.url,
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      PORT: String(port),
      DRAIN_EVERY_SECONDS: String(options.drainEverySeconds),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  stack.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  stack.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    if (stack.exitCode === null) {
      stack.kill('SIGTERM');
      await once(stack, 'exit');
    }
    await database.drop();
  };
  for (let waited = 0; !output.includes('Ctrl-C stops everything'); waited += 200) {
    if (waited > 120_000 || stack.exitCode !== null) {
      await stop();
      throw new Error(`npm start did not come up:\n${output}`);
    }
    await sleep(200);
  }
  return {
    api: `http://127.0.0.1:${port}`,
    headers: adminHeaders,
    db: database.db,
    transactions: database.transactions,
    stop,
  };
}

/** Statements the database ran in each of `minutes` minutes (pg_stat_database's transactions), each logged as it ends. */
export async function statementsPerIdleMinute(
  transactions: () => Promise<number>,
  minutes: number,
  label: string,
): Promise<number[]> {
  const perMinute: number[] = [];
  let before = await transactions();
  for (let minute = 0; minute < minutes; minute++) {
    await sleep(60_000);
    const now = await transactions();
    perMinute.push(now - before);
    before = now;
    console.error(`${label}idle minute ${minute + 1}: ${perMinute.at(-1)} statements`);
  }
  return perMinute;
}
