import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyFreePort } from '../src/local/ports';
import { waitUntilGone } from '../src/local/processes';
import { createTestDatabase, type TestDatabase } from './support/database';
import { npmStart, scratchCheckout } from './support/npm-start';
import { waitFor } from './support/wait-for';

/** Every process below `pid`, found through parent ids (`ps` lists them all). */
async function descendantsOf(pid: number): Promise<number[]> {
  const { stdout } = await promisify(execFile)('ps', ['-eo', 'pid=,ppid=']);
  const children = new Map<number, number[]>();
  for (const line of stdout.trim().split('\n')) {
    const [child, parent] = line.trim().split(/\s+/).map(Number) as [number, number];
    children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  for (let queue = [pid]; queue.length > 0; ) {
    const next = children.get(queue.shift()!) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

describe('npm start', () => {
  let checkout: string;
  let database: TestDatabase;
  beforeAll(async () => {
    [checkout, database] = await Promise.all([scratchCheckout(), createTestDatabase({ migrated: false })]);
  });
  afterAll(async () => {
    await database?.drop();
    if (checkout) await rm(checkout, { recursive: true, force: true });
  });

  it('refuses a Worker setting it was given but the Worker could not read, in one line, before it starts anything', async () => {
    const stack = await npmStart(checkout, { DATABASE_URL: database.url, WORKERS_PLAN: 'gold' });
    const [code] = await stack.exited;

    expect(code).toBe(1);
    expect(stack.output()).toMatch(/^skiplock dev: WORKERS_PLAN must be free or paid, not "gold"$/m);
    expect(stack.output()).not.toMatch(/migrations:/);
  });

  // Well under a minute on an idle machine; the margin is for a busy CI box.
  it('migrates, serves /healthz, fires drains, takes skiplock migrate and work against its database; SIGTERM stops all it started', {
    timeout: 120_000,
  }, async () => {
    const port = await anyFreePort();
    const stack = await npmStart(checkout, {
      DATABASE_URL: database.url,
      PORT: String(port),
      DRAIN_EVERY_SECONDS: '1',
      ADMIN_TOKEN: 'test-admin',
    });

    try {
      const output = stack.output();
      expect(output).toMatch(/migrations: applied 0001_schema\.sql/);
      expect(output).toMatch(new RegExp(`API +http://127\\.0\\.0\\.1:${port}\\n`));
      expect(output).toMatch(/admin key +test-admin +\(from ADMIN_TOKEN\)/);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      await expectCliWorksAgainst(checkout, database.url, `http://127.0.0.1:${port}`);
      // DRAIN_EVERY_SECONDS=1: a cron drain ran (it logs its counts in the Worker log); a failed firing would have printed a line.
      const workerLog = join(checkout, '.data', 'wrangler.log');
      await waitFor('a cron drain to log its counts in the Worker log', async () =>
        (await readFile(workerLog, 'utf8')).includes('"event":"drain"'),
      );
      expect(stack.output()).not.toMatch(/drain \(cron/);
      const started = await descendantsOf(stack.process.pid!);
      // At least node, wrangler's launcher, wrangler and workerd.
      expect(started.length).toBeGreaterThanOrEqual(4);

      stack.process.kill('SIGTERM');
      const [code] = await stack.exited;
      expect({ code, output: stack.output() }).toEqual({
        code: 0,
        output: expect.stringMatching(/stopping \(SIGTERM\)\nstopped\n$/),
      });
      // tsx's esbuild helper ends when it sees its parent gone, a moment after the exit.
      const leftOver = await Promise.all(started.map(async (pid) => ((await waitUntilGone(pid, 3_000)) ? [] : [pid])));
      expect(leftOver.flat()).toEqual([]);
    } finally {
      await stack.stop();
    }
  });
});

/** A user's job module, as `skiplock work` loads it. */
const JOB_MODULE = `
import { z } from 'zod';
import { defineJob } from 'skiplock/drain';
export const shout = defineJob('cli-shout', z.object({ word: z.string() }), ({ word }) => ({ shouted: word.toUpperCase() }));
`;

/**
 * The package's CLI (what \`npx skiplock\` runs) against the database \`npm start\`
 * serves: \`migrate\` finds nothing left to do, and \`work\` runs a job type that
 * only the user's module defines, enqueued over the running Worker's API.
 */
async function expectCliWorksAgainst(checkout: string, databaseUrl: string, apiUrl: string): Promise<void> {
  const cli = (args: string[]) =>
    spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      cwd: checkout,
      env: { ...process.env, DATABASE_URL: databaseUrl, POLL_INTERVAL_MS: '100' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  const migrate = cli(['migrate']);
  let migrated = '';
  migrate.stdout.on('data', (chunk: Buffer) => (migrated += chunk.toString()));
  expect((await once(migrate, 'exit'))[0]).toBe(0);
  expect(migrated).toMatch(/schema up to date/);

  await writeFile(join(checkout, 'jobs.ts'), JOB_MODULE);
  const work = cli(['work', './jobs.ts']);
  const exited = once(work, 'exit');
  try {
    const headers = { authorization: 'Bearer test-admin', 'content-type': 'application/json' };
    const enqueued = await fetch(`${apiUrl}/v1/queues/cli-shout/jobs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ payload: { word: 'hello' } }),
    });
    const { id } = (await enqueued.json()) as { id: string };
    let job: { status: string; result: unknown } = { status: 'queued', result: null };
    for (let tries = 0; tries < 100 && job.status !== 'succeeded'; tries++) {
      job = (await (await fetch(`${apiUrl}/v1/jobs/${id}?wait=1`, { headers })).json()) as typeof job;
    }
    expect(job).toMatchObject({ status: 'succeeded', result: { shouted: 'HELLO' } });
  } finally {
    work.kill('SIGTERM');
  }
  expect((await exited)[0]).toBe(0);
}
