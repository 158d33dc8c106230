import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from '../../src/local/start/local-paths';

/**
 * A copy of the repository with node_modules linked in, so that this run's
 * `.data/` (worker variables, wrangler state and log) stays out of the
 * developer's own, which an `npm start` may be using right now.
 */
export async function scratchCheckout(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-start-'));
  for (const entry of ['package.json', 'tsconfig.json', 'wrangler.toml', 'src', 'migrations']) {
    await cp(join(projectRoot, entry), join(dir, entry), { recursive: true });
  }
  await symlink(join(projectRoot, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** `npm start` running in a checkout, until its banner is printed or it exits. */
export interface NpmStart {
  readonly process: ChildProcessByStdio<null, Readable, Readable>;
  /** Everything it printed so far, stdout and stderr together. */
  output(): string;
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  /** SIGTERM, then its exit, if it still runs. */
  stop(): Promise<void>;
}

export async function npmStart(checkout: string, env: NodeJS.ProcessEnv, upWithinMs = 90_000): Promise<NpmStart> {
  const child = spawn('npm', ['start'], { cwd: checkout, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const deadline = Date.now() + upWithinMs;
  while (!output.includes('Ctrl-C stops everything') && child.exitCode === null && Date.now() < deadline) await sleep(200);
  return {
    process: child,
    output: () => output,
    exited,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}
