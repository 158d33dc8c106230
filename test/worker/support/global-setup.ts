import type { TestProject } from 'vitest/node';
import { startNeonProxy } from '../../../src/local/neon-proxy';
import { cloneTemplate, withDatabase } from '../../support/admin';
import { postgresAddressOf } from '../../support/postgres-address';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `host:port/<secret>` of the local Neon proxy: the Worker's LOCAL_NEON_PROXY binding. */
    neonProxy: string;
    /** A migrated database that the Worker tests share: the Worker's DATABASE_URL binding. */
    workerDatabaseUrl: string;
  }
}

/**
 * What the Worker under test needs on the Node side: a database and the local
 * Neon proxy in front of it, so the real Neon drivers inside workerd reach the
 * run's Postgres. Runs after test/support/global-setup.ts (globalSetup files
 * run in order), whose server, template and run prefix it uses.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { adminUrl, templateDatabase, runPrefix } = project.getProvidedContext();
  // The run prefix puts it among the databases the shared teardown drops.
  const database = `${runPrefix}_worker`;
  await cloneTemplate(adminUrl, database, templateDatabase);
  const proxy = await startNeonProxy({ postgres: postgresAddressOf(adminUrl) });
  project.provide('neonProxy', proxy.address);
  project.provide('workerDatabaseUrl', withDatabase(adminUrl, database));
  return () => proxy.close();
}
