import { pgDb } from '../db/pg.js';
import { loadMigrations } from '../migrate/load.js';
import { migrate, type MigrateResult } from '../migrate/runner.js';
import { explainConnectionFailure } from './database-failure.js';
import type { DatabaseTarget } from './database-url.js';

/**
 * Applies the pending migrations through node-postgres. Failures come out as
 * one-line errors that say what to fix: a bad folder or a changed migration
 * (the runner's own messages) or a database that cannot be reached.
 */
export async function applyMigrations(target: DatabaseTarget, migrationsDir?: string): Promise<MigrateResult> {
  const migrations = await loadMigrations(migrationsDir);
  const db = pgDb(target.url, { max: 1 });
  try {
    return await migrate(db, migrations);
  } catch (error) {
    const explanation = explainConnectionFailure(error, target);
    throw explanation === undefined ? error : new Error(explanation, { cause: error });
  } finally {
    await db.close();
  }
}

/** One line for a log: what was applied, and how many were applied before. */
export function describeMigrateResult({ applied, alreadyApplied }: MigrateResult): string {
  const before = `${alreadyApplied.length} migration${alreadyApplied.length === 1 ? ' was' : 's were'} already applied`;
  if (applied.length === 0) return `schema up to date: ${before}`;
  return alreadyApplied.length === 0 ? `applied ${applied.join(', ')}` : `applied ${applied.join(', ')}; ${before}`;
}
