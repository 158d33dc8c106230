import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyFreePort, LOOPBACK } from '../src/local/ports';
import { compileCli, type CompiledCli } from './support/compiled-cli';
import { projectRoot } from './support/repository-root';

interface DevRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The processes of its process group still there once it exited. */
  left: number[];
}

let cli: CompiledCli;
let scratch: string;

beforeAll(async () => {
  [cli, scratch] = await Promise.all([compileCli(), mkdtemp(join(tmpdir(), 'skiplock-dev-refusals-'))]);
});

afterAll(async () => {
  await Promise.all([cli.remove(), rm(scratch, { recursive: true, force: true })]);
});

/**
 * Runs `skiplock dev ARGS` as the leader of its own process group, with a
 * state folder of its own and no DATABASE_URL unless `env` gives one.
 */
async function runDev(name: string, args: string[], env: Record<string, string> = {}): Promise<DevRun> {
  const { DATABASE_URL: _ignored, PORT: _port, ...inherited } = process.env;
  const child = spawn(process.execPath, [cli.main, 'dev', '--state-dir', join(scratch, `${name}-state`), ...args], {
    env: { ...inherited, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  const { stdout: table } = await promisify(execFile)('ps', ['-eo', 'pid=,pgid=']);
  const left = table
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number])
    .filter(([, group]) => group === child.pid)
    .map(([pid]) => pid);
  return { code, stdout, stderr, left };
}

/** One line on stderr saying what to do, nothing on stdout, a non-zero exit, and nothing left running. */
function expectRefused(run: DevRun, message: RegExp): void {
  expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(message)]);
  expect(run.stdout).toBe('');
  expect(run.code).not.toBe(0);
  expect(run.left).toEqual([]);
}

/** A Worker project of one wrangler config (the given text), with this repository's wrangler. */
async function project(name: string, config?: string): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir);
  if (config !== undefined) {
    await writeFile(join(dir, 'wrangler.toml'), config);
    await symlink(join(projectRoot, 'node_modules'), join(dir, 'node_modules'));
  }
  return dir;
}

describe('skiplock dev refuses, in one line saying what to do, before it starts anything', () => {
  it('a folder without a wrangler config', async () => {
    const dir = await project('empty');
    expectRefused(
      await runDev('empty', ['--cwd', dir]),
      /^skiplock dev: no wrangler\.jsonc, wrangler\.json or wrangler\.toml in \S+: run skiplock dev in your Worker's folder, or pass --cwd$/,
    );
  });

  it("a config that binds neither of skiplock's Durable Objects", async () => {
    const dir = await project('other', 'name = "other"\nmain = "index.js"\ncompatibility_date = "2026-04-26"\n');
    expectRefused(
      await runDev('other', ['--cwd', dir]),
      /^skiplock dev: .*binds no SKIPLOCK_CLOCK or SKIPLOCK_DRAINER/,
    );
  });

  it('a port in use', async () => {
    const port = await anyFreePort();
    const holder: Server = createServer().listen(port, LOOPBACK);
    await once(holder, 'listening');
    try {
      expectRefused(
        await runDev('port', ['--cwd', projectRoot, '--port', String(port)]),
        new RegExp(`^skiplock dev: port ${port} \\(--port\\) is in use: choose a free port`),
      );
    } finally {
      holder.close();
    }
  });

  it('a DATABASE_URL nothing answers at, and makes no embedded Postgres', async () => {
    const port = await anyFreePort();
    const run = await runDev('refused', ['--cwd', projectRoot], {
      DATABASE_URL: `postgres://app:secret@127.0.0.1:${port}/app`,
    });
    expectRefused(
      run,
      new RegExp(`^skiplock dev: nothing accepts connections at 127\\.0\\.0\\.1:${port}: start Postgres there or fix`),
    );
    expect(await readdir(join(scratch, 'refused-state'))).not.toContain('postgres');
  });
});
