import { parseArgs } from 'node:util';
import { applyMigrations, describeMigrateResult } from './apply-migrations.js';
import { parseDatabaseUrl, withoutPassword } from './database-url.js';
import { runCli } from './run-cli.js';

const USAGE =
  'usage: npm run migrate -- [--database-url postgres://...] [--migrations-dir DIR] (default: DATABASE_URL, ./migrations)';

/** `npm run migrate`: applies the pending migrations to DATABASE_URL. Safe to run twice, or from two places at once. */
async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2));
  const value = options['database-url'] ?? process.env.DATABASE_URL;
  if (!value) {
    throw new Error(
      'DATABASE_URL is not set: set it to your Postgres URL (postgres://user:password@host:5432/database) or pass --database-url',
    );
  }
  const target = parseDatabaseUrl(value, options['database-url'] === undefined ? 'DATABASE_URL' : '--database-url');
  const result = await applyMigrations(target, options['migrations-dir']);
  console.log(`${withoutPassword(target.url)}: ${describeMigrateResult(result)}`);
}

function readOptions(args: string[]) {
  try {
    return parseArgs({
      args,
      options: { 'database-url': { type: 'string' }, 'migrations-dir': { type: 'string' } },
    }).values;
  } catch (error) {
    // parseArgs explains in sentences; the first one names the bad argument.
    throw new Error(`${(error as Error).message.split('. ', 1)[0]}; ${USAGE}`);
  }
}

runCli('skiplock migrate', main);
