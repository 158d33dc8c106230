import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { cloneTemplate, runAdmin, withDatabase } from './admin';

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
  if (options.migrated === false) await runAdmin(adminUrl, `CREATE DATABASE ${name} TEMPLATE template0`);
  else await cloneTemplate(adminUrl, name, inject('templateDatabase'));
  return {
    url: withDatabase(adminUrl, name),
    name,
    drop: async () => void (await runAdmin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)),
  };
}
