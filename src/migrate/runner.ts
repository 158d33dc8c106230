import type { Queryable, SessionDb } from '../db/types.js';

export interface Migration {
  /** File name, e.g. `0001_jobs.sql`; the order of application is the order of names. */
  readonly name: string;
  readonly sql: string;
  /** sha256 of the file's text, hex. */
  readonly checksum: string;
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: string[];
}

export class MigrationError extends Error {
  override readonly name: string = 'MigrationError';
}

/**
 * The database holds the schema of a skiplock from before its first release,
 * whose migrations were since folded into one: no upgrade path leads from it.
 */
export class PreReleaseSchemaError extends MigrationError {
  override readonly name = 'PreReleaseSchemaError';
  constructor(readonly migration: string) {
    super(
      `this database has skiplock's schema from before its first release (migration ${migration}), which cannot be ` +
        'upgraded: drop that schema (DROP SCHEMA skiplock CASCADE, losing its jobs) and migrate again',
    );
  }
}

/** The migrations of the pre-release schema (folded into 0001_schema.sql). */
const PRE_RELEASE_MIGRATIONS = new Set([
  '0001_jobs.sql',
  '0002_api_keys.sql',
  '0003_job_notify.sql',
  '0004_jit_off.sql',
  '0005_lean_hot_path.sql',
  '0006_refresh_statistics.sql',
  '0007_claim_batch_function.sql',
]);

// Any fixed number works; it only has to be the same in every process that migrates.
const MIGRATION_LOCK_KEY = 7_210_428_017;

const takeLock = { text: 'SELECT pg_advisory_xact_lock($1)', params: [MIGRATION_LOCK_KEY] };

const createLedger = {
  text: `CREATE SCHEMA IF NOT EXISTS skiplock;
    CREATE TABLE IF NOT EXISTS skiplock.migrations (
      name text PRIMARY KEY,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`,
  params: [],
};

const readLedger = { text: 'SELECT name, checksum FROM skiplock.migrations ORDER BY name', params: [] };

const recordMigration = (migration: Migration) => ({
  text: 'INSERT INTO skiplock.migrations (name, checksum) VALUES ($1, $2)',
  params: [migration.name, migration.checksum],
});

/**
 * Applies the pending migrations in one transaction under a transaction-scoped
 * advisory lock: a second process waits, then finds nothing left to do. A file
 * that changed after it was applied is refused by name, because the database
 * no longer matches what the repository says it is.
 */
export async function migrate(db: SessionDb, migrations: readonly Migration[]): Promise<MigrateResult> {
  const ordered = [...migrations].sort((a, b) => a.name.localeCompare(b.name));
  return db.withTransaction(async (tx) => {
    await tx.query(takeLock);
    // Multi-statement text runs in the simple protocol, so it cannot carry parameters.
    await tx.query(createLedger);
    const ledger = new Map(
      (await tx.query<{ name: string; checksum: string }>(readLedger)).map((row) => [row.name, row.checksum]),
    );
    checkLedger(ledger, ordered);
    const applied: string[] = [];
    for (const migration of ordered) {
      if (ledger.has(migration.name)) continue;
      await applyOne(tx, migration);
      applied.push(migration.name);
    }
    return { applied, alreadyApplied: ordered.filter((m) => ledger.has(m.name)).map((m) => m.name) };
  });
}

function checkLedger(ledger: Map<string, string>, migrations: readonly Migration[]): void {
  const retired = [...ledger.keys()].find((name) => PRE_RELEASE_MIGRATIONS.has(name));
  if (retired !== undefined) throw new PreReleaseSchemaError(retired);
  const known = new Set(migrations.map((m) => m.name));
  for (const migration of migrations) {
    const recorded = ledger.get(migration.name);
    if (recorded !== undefined && recorded !== migration.checksum) {
      throw new MigrationError(
        `migration ${migration.name} was changed after it was applied (checksum ${recorded.slice(0, 12)}… in the database, ${migration.checksum.slice(0, 12)}… on disk): add a new migration instead of editing an applied one`,
      );
    }
  }
  for (const name of ledger.keys()) {
    if (!known.has(name)) {
      throw new MigrationError(
        `migration ${name} is recorded in the database but missing from the migrations folder: this code is older than the database`,
      );
    }
  }
}

async function applyOne(tx: Queryable, migration: Migration): Promise<void> {
  try {
    await tx.query({ text: migration.sql, params: [] });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new MigrationError(`migration ${migration.name} failed: ${reason}`, { cause: error });
  }
  await tx.query(recordMigration(migration));
}
