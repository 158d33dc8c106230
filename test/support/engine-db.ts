import { afterAll, afterEach } from 'vitest';
import type { Db } from '../../src/db/types';
import { createTestDatabase } from './database';
import { closeNeonProxy, connectDriver, type DriverName } from './drivers';

/**
 * Opens a fresh migrated database per call, over the named driver, and closes
 * and drops it after the test. Every test gets an empty queue.
 */
export function engineDatabases(): (driver: DriverName, connections?: number) => Promise<{ db: Db; url: string }> {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(closeNeonProxy);
  return async (driver, connections) => {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const db = await connectDriver(driver, database.url, connections);
    cleanups.push(() => db.close());
    return { db, url: database.url };
  };
}
