import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { oneWranglerStartAtATime } from './wrangler-start';

export { scratchCheckout } from './scratch-checkout';

/** `npm start` running in a checkout, until its banner is printed or it exits. */
export interface NpmStart {
  readonly process: ChildProcessByStdio<null, Readable, Readable>;
  /** Everything it printed so far, stdout and stderr together. */
  output(): string;
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  /** SIGTERM, then its exit, if it still runs. */
  stop(): Promise<void>;
}

/** Other files' `npm start` and wrangler dev wait until this one is up, or has ended (test/support/wrangler-start.ts). */
export function npmStart(checkout: string, env: NodeJS.ProcessEnv, upWithinMs = 90_000): Promise<NpmStart> {
  return oneWranglerStartAtATime(() => startNpm(checkout, env, upWithinMs));
}

async function startNpm(checkout: string, env: NodeJS.ProcessEnv, upWithinMs: number): Promise<NpmStart> {
  const child = spawn('npm', ['start'], {
    cwd: checkout,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const deadline = Date.now() + upWithinMs;
  while (!output.includes('Ctrl-C stops everything') && child.exitCode === null && Date.now() < deadline)
    await sleep(200);
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
