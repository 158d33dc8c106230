import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestProject } from 'vitest/node';
import { anyFreePort } from '../../../src/local/ports';
import { scratchCheckout } from '../../support/scratch-checkout';

declare module 'vitest' {
  export interface ProvidedContext {
    /** What the security suite probes: an `npm start` of this checkout's code, with nothing set. */
    stack: {
      /** The Worker's URL. */
      url: string;
      /** The scratch checkout it runs in; its `.data/` holds what npm start keeps. */
      checkout: string;
      /** The dev admin key npm start made (`.data/admin-token`). */
      adminToken: string;
    };
  }
}

const STARTED_WITHIN_MS = 150_000;

/**
 * `npm start` as a developer runs it on a fresh clone: no DATABASE_URL, so
 * an embedded Postgres; the Neon proxy, the Worker under wrangler dev and its
 * drains, every second. Stopped with SIGTERM at the end.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const checkout = await scratchCheckout();
  const port = await anyFreePort();
  const { DATABASE_URL: _database, ADMIN_TOKEN: _admin, ...environment } = process.env;
  const npmStart = spawn('npm', ['start'], {
    cwd: checkout,
    env: { ...environment, PORT: String(port), DRAIN_EVERY_SECONDS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  npmStart.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  npmStart.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(npmStart, 'exit');
  const stop = async () => {
    if (npmStart.exitCode === null) {
      npmStart.kill('SIGTERM');
      await exited;
    }
    await rm(checkout, { recursive: true, force: true });
  };

  for (const deadline = Date.now() + STARTED_WITHIN_MS; !output.includes('Ctrl-C stops everything'); ) {
    if (npmStart.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`npm start did not come up:\n${output}`);
    }
    await sleep(200);
  }
  const adminToken = (await readFile(join(checkout, '.data/admin-token'), 'utf8')).trim();
  project.provide('stack', { url: `http://127.0.0.1:${port}`, checkout, adminToken });
  return stop;
}
