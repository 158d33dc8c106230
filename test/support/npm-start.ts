import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

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

export async function npmStart(checkout: string, env: NodeJS.ProcessEnv, upWithinMs = 90_000): Promise<NpmStart> {
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
