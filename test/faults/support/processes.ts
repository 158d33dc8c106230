import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { projectRoot } from '../../support/repository-root';
import { spawnProcessGroup, type ProcessGroup } from '../../../src/local/processes';

export interface Spawned extends ProcessGroup {
  workerId: string;
  /** SIGKILL to the whole group: no handler runs, no lease is released. */
  kill(): Promise<void>;
}

/**
 * Starts TypeScript entry points (`npm run work`'s, or a test script) as
 * process groups with their output appended to `logFile`, and SIGKILLs
 * whatever is left after each test.
 */
export function processes(logFile: string) {
  const started: Spawned[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((child) => child.kill()));
  });

  async function spawnEntry(
    entry: string,
    args: string[],
    workerId: string,
    env: Record<string, string>,
  ): Promise<Spawned> {
    const log = await open(logFile, 'a');
    try {
      const group = await spawnProcessGroup(process.execPath, ['--import', 'tsx', join(projectRoot, entry), ...args], {
        cwd: projectRoot,
        env: { ...process.env, WORKER_ID: workerId, ...env },
        output: log.fd,
      });
      const spawned: Spawned = {
        ...group,
        workerId,
        async kill() {
          try {
            process.kill(-group.pid, 'SIGKILL');
          } catch {
            // Already gone.
          }
          await group.exited;
        },
      };
      started.push(spawned);
      return spawned;
    } finally {
      await log.close();
    }
  }

  return {
    /** `npm run work` with the demo jobs on. */
    nodeWorker: (databaseUrl: string, workerId: string, env: Record<string, string> = {}) =>
      spawnEntry('src/cli/main.ts', ['work'], workerId, { DATABASE_URL: databaseUrl, SKIPLOCK_DEV: '1', ...env }),
    /** A Node worker delivering in bulk to a webhook (test/faults/support/delivery-worker.ts). */
    deliveryWorker: (
      databaseUrl: string,
      workerId: string,
      env: { TARGET_URL: string; TARGET_SECRET: string; DELIVERY_SECRET_TARGET: string },
    ) => spawnEntry('test/faults/support/delivery-worker.ts', [], workerId, { DATABASE_URL: databaseUrl, ...env }),
    /** A pull worker (test/faults/support/pull-worker.ts). */
    pullWorker: (databaseUrl: string, workerId: string, env: Record<string, string> = {}) =>
      spawnEntry('test/faults/support/pull-worker.ts', [], workerId, { DATABASE_URL: databaseUrl, ...env }),
    /** A drain loop or a pull worker running the key scenarios' job (test/faults/support/keyed-worker.ts). */
    keyedWorker: (databaseUrl: string, workerId: string, mode: 'drain' | 'pull') =>
      spawnEntry('test/faults/support/keyed-worker.ts', [], workerId, { DATABASE_URL: databaseUrl, KEYED_MODE: mode }),
  };
}
