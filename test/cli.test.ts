import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { projectRoot } from './support/repository-root';
import { pgDb } from '../src/db/pg';
import { anyFreePort } from '../src/local/ports';
import { withDatabase } from './support/admin';
import { compileCli, type CompiledCli } from './support/compiled-cli';
import { createTestDatabase } from './support/database';

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `skiplock migrate` with only the given DATABASE_URL (if any) in its environment. */
function runMigrate(databaseUrl: string | undefined, args: string[] = []): Promise<CliRun> {
  return runCli(databaseUrl, ['migrate', ...args]);
}

// The bin's source compiled once for the file, as dist/ is: each run then starts in plain Node.
let cli: CompiledCli;
beforeAll(async () => {
  cli = await compileCli();
});
afterAll(() => cli.remove());

/** Runs the package's CLI (src/cli/main.ts, the bin's source) with only the given DATABASE_URL (if any). */
async function runCli(
  databaseUrl: string | undefined,
  args: string[],
  settings: Record<string, string> = {},
): Promise<CliRun> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const env = { ...inherited, ...settings };
  try {
    // `work` loads the tests' TypeScript job modules, so it runs under tsx, as such a user runs it.
    const loader = args[0] === 'work' ? ['--import', 'tsx'] : [];
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...loader, cli.main, ...args], {
      cwd: projectRoot,
      env: databaseUrl === undefined ? env : { ...env, DATABASE_URL: databaseUrl },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** A failed run printed exactly one line, on stderr, and nothing else. */
function expectOneLineFailure(run: CliRun, message: RegExp): void {
  expect(run.code).not.toBe(0);
  expect(run.stdout).toBe('');
  expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(message)]);
}

describe('skiplock migrate', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('applies the migrations to a fresh database, then finds nothing left to do', async () => {
    const database = await createTestDatabase({ migrated: false });
    cleanups.push(database.drop);

    const first = await runMigrate(database.url);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/: applied 0001_schema\.sql/);

    const second = await runMigrate(undefined, ['--database-url', database.url]);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout).toMatch(/: schema up to date: \d+ migrations? (was|were) already applied\n$/);
  });

  it('refuses in one line a database with the pre-release schema, saying what to do', async () => {
    const database = await createTestDatabase({ migrated: false });
    cleanups.push(database.drop);
    // A database migrated by skiplock before its schema was folded into one file.
    const db = pgDb(database.url, { max: 1 });
    cleanups.push(() => db.close());
    await db.query({
      text: `CREATE SCHEMA skiplock;
             CREATE TABLE skiplock.migrations (name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
             INSERT INTO skiplock.migrations (name, checksum) VALUES ('0001_jobs.sql', 'x'), ('0002_api_keys.sql', 'y')`,
      params: [],
    });
    expectOneLineFailure(
      await runMigrate(database.url),
      /^skiplock migrate: this database has skiplock's schema from before its first release \(migration 0001_jobs\.sql\), which cannot be upgraded: drop that schema \(DROP SCHEMA skiplock CASCADE/,
    );
  });

  it('says DATABASE_URL is missing', async () => {
    expectOneLineFailure(await runMigrate(undefined), /^skiplock migrate: DATABASE_URL is not set: set it to/);
  });

  it('refuses a malformed URL before connecting', async () => {
    expectOneLineFailure(await runMigrate('localhost:5432/test'), /DATABASE_URL must start with postgres:\/\//);
    expectOneLineFailure(await runMigrate('not a url'), /DATABASE_URL is not a URL: expected postgres:\/\//);
  });

  it('names the address when nothing listens there', async () => {
    const port = await anyFreePort();
    expectOneLineFailure(
      await runMigrate(`postgres://postgres@127.0.0.1:${port}/postgres`),
      new RegExp(`nothing accepts connections at 127\\.0\\.0\\.1:${port}: start Postgres there or fix`),
    );
  });

  it('names a database that does not exist and how to create it', async () => {
    const url = withDatabase(inject('adminUrl'), 'skiplock_no_such_database');
    expectOneLineFailure(
      await runMigrate(url),
      /database "skiplock_no_such_database" does not exist on .+: create it \(createdb .+\) or fix the name in DATABASE_URL/,
    );
  });

  it('says the login was refused and what to fix', async () => {
    const url = new URL(inject('adminUrl'));
    url.username = 'skiplock_no_such_role';
    url.password = 'wrong';
    expectOneLineFailure(
      await runMigrate(url.toString()),
      /refused user "skiplock_no_such_role" \(.+\): fix the user or password in DATABASE_URL/,
    );
  });

  it('names a migrations folder that is missing', async () => {
    const database = await createTestDatabase({ migrated: false });
    cleanups.push(database.drop);
    expectOneLineFailure(
      await runMigrate(database.url, ['--migrations-dir', '/nonexistent/migrations']),
      /cannot read the migrations folder \/nonexistent\/migrations/,
    );
  });

  it('names an unknown option', async () => {
    expectOneLineFailure(
      await runMigrate(undefined, ['--databse-url', 'x']),
      /^skiplock migrate: Unknown option '--databse-url'; usage: skiplock migrate/,
    );
  });
});

describe('skiplock work: job modules that cannot work', () => {
  const modules = async (files: Record<string, string>): Promise<string> => {
    // Inside the project (git-ignored), so the module resolves zod and skiplock as a user's would.
    await mkdir(join(projectRoot, '.scratch'), { recursive: true });
    const dir = await mkdtemp(join(projectRoot, '.scratch', 'jobs-'));
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    return dir;
  };
  const header = "import { z } from 'zod';\nimport { defineJob, definePeriodicJob } from 'skiplock/drain';\n";
  const job = (type: string) => `defineJob('${type}', z.unknown(), () => null)`;

  it.each([
    [
      'exports no jobs',
      'export const answer = 42;',
      /^skiplock work: .*none\.ts exports no job definitions: export defineJob/,
    ],
    [
      'defines one type twice',
      `export const a = ${job('twice')};\nexport const b = ${job('twice')};`,
      /^skiplock work: job type "twice" is defined twice$/,
    ],
    [
      'schedules an unknown type',
      `export const a = ${job('known')};\nexport const s = definePeriodicJob({ name: 'nightly', cron: '0 3 * * *', type: 'unknown' });`,
      /^skiplock work: periodic job "nightly" names job type "unknown", which no job definition has$/,
    ],
    ['cannot be loaded', "import './missing.js';", /^skiplock work: cannot load .*none\.ts: Cannot find module/],
  ])('refuses a module that %s, in one line', async (_case, body, message) => {
    const dir = await modules({ 'none.ts': header + body });
    try {
      expectOneLineFailure(
        await runCli('postgres://postgres@127.0.0.1:1/unused', ['work', join(dir, 'none.ts')]),
        message,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start without DATABASE_URL, with a setting it cannot read, and an unknown command', async () => {
    expectOneLineFailure(await runCli(undefined, ['work']), /^skiplock work: DATABASE_URL is not set/);
    expectOneLineFailure(
      await runCli('postgres://postgres@127.0.0.1:1/unused', ['work'], { WORKER_CONCURRENCY: 'lots' }),
      /^skiplock work: WORKER_CONCURRENCY must be a whole number from 1 to 1000, not "lots"$/,
    );
    expectOneLineFailure(await runCli(undefined, ['wrok']), /^skiplock wrok: unknown command; commands: migrate, work/);
  });
});
