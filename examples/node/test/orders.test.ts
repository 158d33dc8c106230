import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { enqueue, poolDb, type Job } from 'skiplock';
import { confirmOrder } from '../src/jobs.js';
import { createOrderServer } from '../src/server.js';

const databaseUrl = process.env.EXAMPLE_DATABASE_URL;
if (!databaseUrl) throw new Error('set EXAMPLE_DATABASE_URL to an empty Postgres database for the example to use');

const pool = new pg.Pool({ connectionString: databaseUrl });
const server = createOrderServer(pool);
let baseUrl = '';
const children: ChildProcess[] = [];

function run(command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, {
    env: { ...process.env, DATABASE_URL: databaseUrl, POLL_INTERVAL_MS: '200' },
    stdio: 'inherit',
  });
  children.push(child);
  return child;
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  return exited;
}

async function placeOrder(body: object): Promise<Response> {
  return fetch(`${baseUrl}/orders`, { method: 'POST', body: JSON.stringify(body) });
}

async function finished(jobId: string): Promise<Job> {
  for (let tries = 0; tries < 200; tries++) {
    const job = (await (await fetch(`${baseUrl}/jobs/${jobId}`)).json()) as Job;
    if (job.status === 'succeeded' || job.status === 'failed') return job;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`job ${jobId} did not finish`);
}

before(async () => {
  execFileSync('npx', ['skiplock', 'migrate', '--database-url', databaseUrl], { stdio: 'inherit' });
  await pool.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text NOT NULL)');
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  server.close();
  await pool.end();
});

describe('the example Node service', () => {
  it('enqueues in the order transaction; a startWorker process runs the job', async () => {
    const worker = run(process.execPath, ['build/src/worker.js']);
    const response = await placeOrder({ email: 'ada@example.com' });
    assert.equal(response.status, 201);
    const { orderId, jobId } = (await response.json()) as { orderId: number; jobId: string };

    const job = await finished(jobId);
    assert.equal(job.status, 'succeeded');
    assert.deepEqual(job.result, { orderId, confirmedTo: 'ada@example.com' });
    assert.equal(await stop(worker), 0);
  });

  it('rolls the job back with the order: neither exists after a failed transaction', async () => {
    const before = await pool.query<{ count: number }>(
      "SELECT count(*)::int AS count FROM skiplock.jobs WHERE type = 'confirm-order'",
    );
    const response = await placeOrder({ email: 'grace@example.com', failAfterInsert: true });

    assert.equal(response.status, 500);
    const afterwards = await pool.query<{ count: number }>(
      "SELECT count(*)::int AS count FROM skiplock.jobs WHERE type = 'confirm-order'",
    );
    const orders = await pool.query("SELECT 1 FROM orders WHERE email = 'grace@example.com'");
    assert.equal(afterwards.rows[0]!.count, before.rows[0]!.count);
    assert.equal(orders.rowCount, 0);
  });

  it('`skiplock work build/src/jobs.js` runs the jobs the module exports', async () => {
    // The bin that `npx skiplock` runs, started directly so that SIGTERM reaches it and not npx.
    const worker = run('node_modules/.bin/skiplock', ['work', 'build/src/jobs.js']);
    const response = await placeOrder({ email: 'linus@example.com' });
    const { jobId } = (await response.json()) as { jobId: string };

    assert.equal((await finished(jobId)).status, 'succeeded');
    assert.equal(await stop(worker), 0);
  });

  it('runs a batch job type over jobs enqueued from plain SQL (skiplock.enqueue)', async () => {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT (skiplock.enqueue('record-order-lines', jsonb_build_object('orderId', 1, 'sku', 'sku-' || n, 'quantity', n % 4),
                                max_attempts => 1))->>'id' AS id
       FROM generate_series(1, 8) AS n`,
    );
    const worker = run('node_modules/.bin/skiplock', ['work', 'build/src/jobs.js']);
    const jobs = await Promise.all(rows.map((row) => finished(row.id)));
    assert.deepEqual(
      jobs.map((job) => job.status),
      ['succeeded', 'succeeded', 'succeeded', 'failed', 'succeeded', 'succeeded', 'succeeded', 'failed'],
    );
    const batchSizes = jobs.flatMap((job) =>
      job.status === 'succeeded' ? [(job.result as { batchSize: number }).batchSize] : [],
    );
    assert.ok(
      Math.max(...batchSizes) > 1,
      `batch sizes ${batchSizes.join(', ')}: the jobs went to the handler together`,
    );
    assert.equal(await stop(worker), 0);
  });

  it('refuses a payload that does not fit, before it is stored', async () => {
    const db = poolDb(pool);
    // @ts-expect-error -- orderId is a number: a wrong payload must fail to compile.
    await assert.rejects(enqueue(db, confirmOrder, { orderId: 'seven', email: 'x@example.com' }), /payload\.orderId/);
    await assert.rejects(enqueue(db, confirmOrder, { orderId: 7, email: 'not an email' }), /payload\.email/);
  });
});
