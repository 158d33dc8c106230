import { chmod, lstat, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where a root process keeps what the Postgres user must reach when the
 * checkout is closed to it: /var/tmp, which every user can enter and which
 * survives a reboot, or the temporary folder where there is no /var/tmp.
 */
export async function sharedRoot(): Promise<string> {
  const varTmp = await lstat('/var/tmp').catch(() => undefined);
  return varTmp?.isDirectory() ? '/var/tmp' : tmpdir();
}

/**
 * A folder of this process's user under the shared root, made when missing.
 * Anyone may create a name there first, so an existing one must be a real
 * folder (not a link) that this user owns and nobody else can write to.
 */
export async function ownSharedFolder(name: string): Promise<string> {
  const path = join(await sharedRoot(), name);
  const made = await mkdir(path).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
      return false;
    },
  );
  // Whatever the umask: others enter, only this user writes.
  if (made) await chmod(path, 0o755);
  await checkOwnFolder(path);
  return path;
}

/** Throws in one line unless `path` is a folder of this process's user that others cannot write to. */
export async function checkOwnFolder(path: string): Promise<void> {
  const info = await lstat(path);
  const own = info.isDirectory() && info.uid === process.getuid?.() && (info.mode & 0o022) === 0;
  if (!own) {
    throw new Error(`${path} is not a folder of this user's that others cannot write to: remove it, then start again`);
  }
}
