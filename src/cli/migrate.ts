import { applyMigrations, describeMigrateResult } from './apply-migrations.js';
import { parseDatabaseUrl, withoutPassword } from './database-url.js';
import { readOptions } from './read-options.js';

const USAGE =
  'usage: skiplock migrate [--database-url postgres://...] [--migrations-dir DIR] (default: DATABASE_URL, the migrations skiplock ships)';

/** `skiplock migrate`: applies the pending migrations to DATABASE_URL. Safe to run twice, or from two places at once. */
export async function migrateCommand(args: string[]): Promise<void> {
  const options = readOptions(
    args,
    { 'database-url': { type: 'string' }, 'migrations-dir': { type: 'string' } },
    USAGE,
  ).values;
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
