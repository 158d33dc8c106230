import { env } from 'cloudflare:workers';
import { inject } from 'vitest';
import type { Queryable } from '../../../../src/db/types';
import { httpDatabase } from '../../support/databases';

/** The Worker tests' shared database, straight through the Neon HTTP driver. */
export function sharedDatabase(): Queryable {
  return httpDatabase(env);
}

/**
 * A database of its own, cloned from the run's migrated template, for a test
 * that must see every row change (the shared one has other files' writes).
 * The run's teardown drops it with the others of the run prefix.
 */
export async function createOwnDatabase(label: string): Promise<string> {
  const name = `${inject('runPrefix')}_${label}_${crypto.randomUUID().slice(0, 8)}`;
  // Both identifiers are generated here, never input, so they are safe to splice.
  await sharedDatabase().query({ text: `CREATE DATABASE ${name} TEMPLATE ${inject('templateDatabase')}`, params: [] });
  // Database settings are not cloned with a template: repeat what migration 0004 sets.
  await sharedDatabase().query({ text: `ALTER DATABASE ${name} SET jit = off`, params: [] });
  const url = new URL(env.DATABASE_URL);
  url.pathname = `/${name}`;
  return url.href;
}

/** Counts a queue's jobs directly in the database. */
export async function jobCount(queue: string): Promise<number> {
  const [row] = await sharedDatabase().query<{ count: number }>({
    text: 'SELECT count(*)::integer AS count FROM skiplock.all_jobs WHERE queue = $1',
    params: [queue],
  });
  return row!.count;
}
