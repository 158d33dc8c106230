import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgDb } from '../src/db/pg';
import type { Db } from '../src/db/types';

/** `npm start` on a fresh database of DATABASE_URL's server, for the scripts that measure the Worker alone. */
export interface WorkerStack {
  /** The Worker's API, and the headers of its admin key. */
  api: string;
  headers: Record<string, string>;
  /** The stack's own database, for the script's reads. */
  db: Db;
  /** Transactions that database has run so far (every statement the Worker sends is one), from pg_stat_database. */
  transactions(): Promise<number>;
  /** Stops `npm start` and drops the database. */
  stop(): Promise<void>;
}

const ADMIN_TOKEN = 'bench-worker-admin-token-0123456789abcdef';

export async function startWorkerStack(options: { name: string; drainEverySeconds: number }): Promise<WorkerStack> {
  const server = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const databaseUrl = (database: string) => Object.assign(new URL(server), { pathname: `/${database}` }).href;
  const name = `skiplock_${options.name}_${Date.now()}`;
  const admin = pgDb(databaseUrl('postgres'), { max: 1 });
  await admin.query({ text: `CREATE DATABASE ${name}`, params: [] });
  const port = 18_000 + Math.floor(Math.random() * 2000);
  const stack = spawn('npm', ['start'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl(name),
      ADMIN_TOKEN,
      PORT: String(port),
      DRAIN_EVERY_SECONDS: String(options.drainEverySeconds),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  stack.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  stack.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const db = pgDb(databaseUrl(name), { max: 1 });
  const stop = async () => {
    if (stack.exitCode === null) {
      stack.kill('SIGTERM');
      await once(stack, 'exit');
    }
    await db.close();
    await admin.query({ text: `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`, params: [] });
    await admin.close();
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
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    db,
    async transactions() {
      const [row] = await admin.query<{ count: string }>({
        text: 'SELECT xact_commit + xact_rollback AS count FROM pg_stat_database WHERE datname = $1',
        params: [name],
      });
      return Number(row!.count);
    },
    stop,
  };
}
