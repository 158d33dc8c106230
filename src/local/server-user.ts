import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';

/** The unprivileged user a root process runs Postgres as (Postgres refuses to run as root). */
export interface ServerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

const NAME = 'postgres';

const run = promisify(execFile);

/**
 * Who runs the embedded Postgres: undefined for this process's own user; for
 * root, the `postgres` user, made (as a system user) when the machine has none.
 */
export async function serverUser(): Promise<ServerUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const found = await lookUp(NAME);
  if (found !== undefined) return found;
  try {
    await run('useradd', ['--system', '--user-group', '--no-create-home', NAME]);
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n', 1)[0] : String(error);
    throw new Error(
      `Postgres does not run as root and there is no user "${NAME}" to run it as; making one failed (${reason}): ` +
        `create it (useradd --system --user-group ${NAME}), run as another user, or set DATABASE_URL`,
    );
  }
  const made = await lookUp(NAME);
  if (made === undefined) throw new Error(`useradd made no user "${NAME}": create it yourself, or set DATABASE_URL`);
  return made;
}

async function lookUp(name: string): Promise<ServerUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', name]), run('id', ['-g', name])]);
    return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/**
 * Whether `user` can enter the folder `path`: every folder from the root down
 * grants it search (x) permission, as its owner, its group or anyone. Only
 * the primary group counts: Node drops the supplementary groups when it starts
 * a process as another user.
 */
export async function canEnter(path: string, user: ServerUser): Promise<boolean> {
  for (let folder = resolve(path); ; folder = dirname(folder)) {
    const info = await stat(folder).catch(() => undefined);
    if (info === undefined) return false;
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if ((info.mode & bit) === 0) return false;
    if (folder === dirname(folder)) return true;
  }
}
