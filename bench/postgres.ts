/**
 * The one Postgres server a benchmark run uses, and a fresh database on it
 * for every system and workload, so no system ever sees another's tables,
 * bloat or statistics.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type LocalPostgres } from '../src/local/embedded-postgres';
import { withPgClient } from '../src/local/pg-client';
import { anyFreePort } from '../src/local/ports';
import { randomSecret } from '../src/local/random-secret';

export interface BenchServer {
  /** Superuser URL of a maintenance database on the server. */
  readonly adminUrl: string;
  /** How the server came to be, for the report. */
  readonly origin: 'embedded' | 'DATABASE_URL';
  stop(): Promise<void>;
}

export interface ServerSettings {
  version: string;
  [setting: string]: string;
}

/** What the report records about the server; every setting that changes how a queue performs. */
const RECORDED_SETTINGS = [
  'shared_buffers',
  'synchronous_commit',
  'fsync',
  'wal_level',
  'max_connections',
  'work_mem',
  'autovacuum',
  'autovacuum_naptime',
  'checkpoint_timeout',
  'max_wal_size',
  'shared_preload_libraries',
] as const;

/**
 * DATABASE_URL when set, else an embedded Postgres. The embedded server keeps
 * Postgres's durable defaults (fsync and synchronous_commit on), as a real
 * server has them: a queue's cost per job is mostly its commits. It is
 * started twice, because pg_stat_statements must be preloaded.
 */
export async function startBenchServer(databaseUrl: string | undefined): Promise<BenchServer> {
  if (databaseUrl) return { adminUrl: databaseUrl, origin: 'DATABASE_URL', stop: async () => {} };
  const dataDir = await mkdtemp(join(tmpdir(), 'skiplock-bench-'));
  const port = await anyFreePort();
  const options = { dataDir, port, persistent: true, password: randomSecret() };
  let server: LocalPostgres = await startEmbeddedPostgres(options);
  await withPgClient(server.url, (client) =>
    client.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"),
  );
  await server.stop();
  server = await startEmbeddedPostgres(options);
  return {
    adminUrl: server.url,
    origin: 'embedded',
    stop: async () => {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export async function readServerSettings(adminUrl: string): Promise<ServerSettings> {
  return withPgClient(adminUrl, async (client) => {
    const { rows } = await client.query<{ name: string; setting: string }>(
      `SELECT name, current_setting(name) AS setting FROM pg_settings WHERE name = ANY($1)`,
      [[...RECORDED_SETTINGS]],
    );
    const { rows: version } = await client.query<{ version: string }>('SELECT version()');
    return { version: version[0]!.version, ...Object.fromEntries(rows.map((row) => [row.name, row.setting])) };
  });
}

export interface BenchDatabase {
  readonly name: string;
  readonly url: string;
  /** A small pool the harness itself reads through (inventory, statistics); never the systems'. */
  readonly probe: pg.Pool;
  /** Whether pg_stat_statements works in this database. */
  readonly statementStats: boolean;
  /** Closes the probe, keeping the database (a template). */
  release(): Promise<void>;
  /** Closes the probe and drops the database. */
  drop(): Promise<void>;
}

let databaseCount = 0;

/**
 * A new database: empty, or a copy of `template` (a database nobody is
 * connected to). `label` only makes its name readable in pg_stat_activity.
 */
export async function createDatabase(server: BenchServer, label: string, template?: string): Promise<BenchDatabase> {
  const name = `bench_${process.pid}_${++databaseCount}_${label.replace(/[^a-z0-9]+/g, '_')}`.slice(0, 63);
  await withPgClient(server.adminUrl, (client) =>
    client.query(`CREATE DATABASE ${name}${template === undefined ? '' : ` TEMPLATE ${template}`}`),
  );
  const url = new URL(server.adminUrl);
  url.pathname = `/${name}`;
  const probe = new pg.Pool({ connectionString: url.toString(), max: 2 });
  probe.on('error', () => {});
  const statementStats = await probe.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').then(
    // The extension installs without being preloaded, and only a read of it says so.
    () =>
      probe.query('SELECT 1 FROM pg_stat_statements LIMIT 1').then(
        () => true,
        () => false,
      ),
    () => false,
  );
  return {
    name,
    url: url.toString(),
    probe,
    statementStats,
    release: () => probe.end(),
    drop: async () => {
      await probe.end();
      await dropDatabase(server, name);
    },
  };
}

/**
 * Makes `name` usable as a template: ends every session still connected to
 * it (a library's pool can outlive its close() by a moment).
 */
export async function disconnectAll(server: BenchServer, name: string): Promise<void> {
  await withPgClient(server.adminUrl, (client) =>
    client.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [name],
    ),
  );
}

export async function dropDatabase(server: BenchServer, name: string): Promise<void> {
  await withPgClient(server.adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/** Runs `work` in a fresh database (a copy of `template` when given) and drops it afterwards, whatever happens. */
export async function inFreshDatabase<T>(
  server: BenchServer,
  label: string,
  work: (db: BenchDatabase) => Promise<T>,
  template?: string,
): Promise<T> {
  const db = await createDatabase(server, label, template);
  try {
    return await work(db);
  } finally {
    await db.drop();
  }
}
