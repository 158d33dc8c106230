import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isRunning } from './processes.js';

/**
 * The pid of the Postgres server running on a data folder, read from the lock
 * file the server keeps there; undefined when no server runs on it (a lock
 * file left by a crash names a process that is gone).
 */
export async function runningPostmasterPid(dataDir: string): Promise<number | undefined> {
  const lockFile = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(lockFile?.split('\n', 1)[0]);
  return Number.isInteger(pid) && pid > 0 && isRunning(pid) ? pid : undefined;
}
