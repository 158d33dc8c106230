import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { pgDb } from '../../src/db/pg';
import { PostgresStartError, startEmbeddedPostgres, type LocalPostgres } from '../../src/local/embedded-postgres';
import { anyFreePort } from '../../src/local/ports';
import { randomSecret } from '../../src/local/random-secret';
import { loadMigrations } from '../../src/migrate/load';
import { migrate } from '../../src/migrate/runner';
import { runAdmin, withDatabase } from './admin';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A superuser URL for creating the per-file databases. */
    adminUrl: string;
    /** A migrated database that each test file clones (CREATE DATABASE ... TEMPLATE). */
    templateDatabase: string;
    /** Prefix of every database this run creates, so teardown can drop them. */
    runPrefix: string;
  }
}

/**
 * One real Postgres for the whole run: DATABASE_URL when set, else a
 * testcontainers Postgres when a Docker engine answers, else an embedded one.
 * It migrates one template database; each test file clones it, so files run in
 * parallel without seeing each other's rows.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startServer();
  const runPrefix = `skiplock_t${randomBytes(3).toString('hex')}`;
  const templateDatabase = `${runPrefix}_template`;
  await runAdmin(server.adminUrl, `CREATE DATABASE ${templateDatabase}`);
  const db = pgDb(withDatabase(server.adminUrl, templateDatabase), { max: 1 });
  try {
    await migrate(db, await loadMigrations());
  } finally {
    await db.close();
  }
  project.provide('adminUrl', server.adminUrl);
  project.provide('templateDatabase', templateDatabase);
  project.provide('runPrefix', runPrefix);
  return async () => {
    await dropRunDatabases(server.adminUrl, runPrefix);
    await server.stop();
  };
}

interface TestServer {
  adminUrl: string;
  stop(): Promise<void>;
}

async function startServer(): Promise<TestServer> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) return { adminUrl: fromEnv, stop: async () => {} };
  const container = await startContainer();
  if (container) return container;
  const dataDir = await mkdtemp(join(tmpdir(), 'skiplock-test-pg-'));
  const password = randomSecret();
  // A port the system handed out; another process can still bind it before Postgres does: then another port.
  let server: LocalPostgres | undefined;
  for (let attempt = 1; server === undefined; attempt++) {
    try {
      server = await startEmbeddedPostgres({ dataDir, port: await anyFreePort(), persistent: false, password });
    } catch (error) {
      if (!(error instanceof PostgresStartError) || attempt === 3) throw error;
    }
  }
  return {
    adminUrl: server.url,
    stop: async () => {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function startContainer(): Promise<TestServer | undefined> {
  try {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:17-alpine').start();
    return { adminUrl: container.getConnectionUri(), stop: async () => void (await container.stop()) };
  } catch (error) {
    // No Docker engine here ("Could not find a working container runtime strategy"): fall back.
    if (process.env.SKIPLOCK_TEST_VERBOSE) console.warn('testcontainers unavailable:', (error as Error).message);
    return undefined;
  }
}

async function dropRunDatabases(adminUrl: string, runPrefix: string): Promise<void> {
  const rows = await runAdmin<{ datname: string }>(
    adminUrl,
    'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
    [runPrefix],
  );
  for (const { datname } of rows) await runAdmin(adminUrl, `DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
}
