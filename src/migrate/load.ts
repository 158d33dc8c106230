import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MigrationError, type Migration } from './runner.js';

/** The repository's `migrations/` folder, wherever the process was started. */
export const defaultMigrationsDir = resolve(fileURLToPath(import.meta.url), '../../../migrations');

const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;

/** Reads `NNNN_name.sql` files from a folder, with their checksums. */
export async function loadMigrations(dir: string = defaultMigrationsDir): Promise<Migration[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    throw new MigrationError(`cannot read the migrations folder ${dir}: ${(error as Error).message}`);
  }
  const files = names.filter((name) => name.endsWith('.sql')).sort();
  const misnamed = files.filter((name) => !MIGRATION_FILE.test(name));
  if (misnamed.length > 0) {
    throw new MigrationError(`migration files must be named NNNN_lower_snake.sql: ${misnamed.join(', ')}`);
  }
  if (files.length === 0) throw new MigrationError(`no migrations found in ${dir}`);
  return Promise.all(
    files.map(async (name) => {
      const sql = await readFile(join(dir, name), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}
