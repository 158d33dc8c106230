import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pgDb } from '../src/db/pg';
import type { SessionDb } from '../src/db/types';
import { loadMigrations } from '../src/migrate/load';
import { MigrationError, migrate } from '../src/migrate/runner';
import { dumpSchema, SCHEMA_DUMP_FILE } from '../scripts/schema-dump';
import { createTestDatabase, type TestDatabase } from './support/database';

describe('migrate', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function blankDatabase(): Promise<{ database: TestDatabase; db: SessionDb }> {
    const database = await createTestDatabase({ migrated: false });
    const db = pgDb(database.url, { max: 4 });
    cleanups.push(database.drop, () => db.close());
    return { database, db };
  }

  it('applies every migration once, records checksums, and is a no-op the second time', async () => {
    const { db } = await blankDatabase();
    const migrations = await loadMigrations();
    const first = await migrate(db, migrations);
    expect(first.applied).toEqual(migrations.map((m) => m.name));
    const second = await migrate(db, migrations);
    expect(second).toEqual({ applied: [], alreadyApplied: migrations.map((m) => m.name) });
    const ledger = await db.query<{ name: string; checksum: string }>({
      text: 'SELECT name, checksum FROM skiplock.migrations ORDER BY name',
      params: [],
    });
    expect(ledger).toEqual(migrations.map(({ name, checksum }) => ({ name, checksum })));
  });

  it('makes the schema docs/schema.sql documents (npm run schema:dump rewrites it after a schema change)', async () => {
    const { db } = await blankDatabase();
    await migrate(db, await loadMigrations());
    expect(await dumpSchema(db)).toBe(await readFile(SCHEMA_DUMP_FILE, 'utf8'));
  });

  it('lets two processes migrate at once: one applies, the other waits and finds nothing to do', async () => {
    const { database } = await blankDatabase();
    const migrations = await loadMigrations();
    const a = pgDb(database.url, { max: 1 });
    const b = pgDb(database.url, { max: 1 });
    cleanups.push(
      () => a.close(),
      () => b.close(),
    );
    const results = await Promise.all([migrate(a, migrations), migrate(b, migrations)]);
    const applied = results.map((r) => r.applied.length).sort();
    expect(applied).toEqual([0, migrations.length]);
  });

  it('refuses a changed, already-applied migration and names it', async () => {
    const { db } = await blankDatabase();
    const migrations = await loadMigrations();
    await migrate(db, migrations);
    const tampered = migrations.map((m, i) => (i === 0 ? { ...m, checksum: 'f'.repeat(64) } : m));
    await expect(migrate(db, tampered)).rejects.toThrow(
      new RegExp(`migration ${migrations[0]!.name} was changed after it was applied`),
    );
  });

  it('rolls back every migration of the run when one fails, and says which', async () => {
    const { db } = await blankDatabase();
    const dir = await mkdtemp(join(tmpdir(), 'skiplock-migrations-'));
    await writeFile(join(dir, '0001_good.sql'), 'CREATE TABLE skiplock.good (id int)');
    await writeFile(join(dir, '0002_bad.sql'), 'CREATE TABLE skiplock.bad (id nosuchtype)');
    const error = await migrate(db, await loadMigrations(dir)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(/migration 0002_bad\.sql failed: type "nosuchtype" does not exist/);
    const tables = await db.query({ text: "SELECT to_regclass('skiplock.good') AS good", params: [] });
    expect(tables).toEqual([{ good: null }]);
  });

  it('says what to fix when the folder is missing or a file is misnamed', async () => {
    await expect(loadMigrations('/nonexistent/migrations')).rejects.toThrow(/cannot read the migrations folder/);
    const dir = await mkdtemp(join(tmpdir(), 'skiplock-migrations-'));
    await writeFile(join(dir, 'create jobs.sql'), 'SELECT 1');
    await expect(loadMigrations(dir)).rejects.toThrow(/must be named NNNN_lower_snake\.sql: create jobs\.sql/);
  });
});
