import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../src/local/start/local-paths';
import { anyFreePort } from '../src/local/ports';
import { waitUntilGone } from '../src/local/processes';
import { createTestDatabase, type TestDatabase } from './support/database';

/**
 * A copy of the repository with node_modules linked in, so that this run's
 * `.data/` (worker variables, wrangler state and log) stays out of the
 * developer's own, which an `npm start` may be using right now.
 */
async function scratchCheckout(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-start-'));
  for (const entry of ['package.json', 'tsconfig.json', 'wrangler.toml', 'src', 'migrations']) {
    await cp(join(projectRoot, entry), join(dir, entry), { recursive: true });
  }
  await symlink(join(projectRoot, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

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

  // Well under a minute on an idle machine; the margin is for a busy CI box.
  it('migrates, serves /healthz, fires drains; SIGTERM stops all it started', { timeout: 120_000 }, async () => {
    const port = await anyFreePort();
    const npmStart = spawn('npm', ['start'], {
      cwd: checkout,
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        PORT: String(port),
        DRAIN_EVERY_SECONDS: '1',
        ADMIN_TOKEN: 'test-admin',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npmStart.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npmStart.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = once(npmStart, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;

    try {
      await waitUntil(() => output.includes('Ctrl-C stops everything') || npmStart.exitCode !== null, 90_000);
      expect(output).toMatch(/migrations: applied 0001_jobs\.sql/);
      expect(output).toMatch(new RegExp(`API +http://127\\.0\\.0\\.1:${port}\\n`));
      expect(output).toMatch(/admin key +test-admin +\(from ADMIN_TOKEN\)/);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      // DRAIN_EVERY_SECONDS=1: a drain has fired by now, and a failed one prints a line.
      await sleep(1_500);
      expect(output).not.toMatch(/drain \(cron/);
      const started = await descendantsOf(npmStart.pid!);
      // At least node, wrangler's launcher, wrangler and workerd.
      expect(started.length).toBeGreaterThanOrEqual(4);

      npmStart.kill('SIGTERM');
      const [code] = await exited;
      expect({ code, output }).toEqual({ code: 0, output: expect.stringMatching(/stopping \(SIGTERM\)\nstopped\n$/) });
      // tsx's esbuild helper ends when it sees its parent gone, a moment after the exit.
      const leftOver = await Promise.all(started.map(async (pid) => ((await waitUntilGone(pid, 3_000)) ? [] : [pid])));
      expect(leftOver.flat()).toEqual([]);
    } finally {
      if (npmStart.exitCode === null) {
        npmStart.kill('SIGTERM');
        await exited;
      }
    }
  });
});

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !condition() && Date.now() < deadline; ) await sleep(200);
}
