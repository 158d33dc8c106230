import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { runAdmin, withDatabase } from './admin';

export interface TestDatabase {
  /** Connection string of a fresh, migrated database that only this caller uses. */
  url: string;
  name: string;
  drop(): Promise<void>;
}

/**
 * A fresh database cloned from the run's migrated template. Database names are
 * generated here, never from input, so the identifier is safe to splice in.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('runPrefix')}_${randomBytes(6).toString('hex')}`;
  const template = options.migrated === false ? 'template0' : inject('templateDatabase');
  await runAdmin(adminUrl, `CREATE DATABASE ${name} TEMPLATE ${template}`);
  return {
    url: withDatabase(adminUrl, name),
    name,
    drop: async () => void (await runAdmin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)),
  };
}
