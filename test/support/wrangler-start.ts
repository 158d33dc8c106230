import pg from 'pg';
import { inject } from 'vitest';

/** The advisory lock's key, in the run's admin database: any number no one else there takes. */
const WRANGLER_START_LOCK = 7_461_002_417;

/**
 * Runs `start`, which starts a `wrangler dev` and returns once it answers,
 * while no other test file of the run starts one. wrangler dev picks its
 * inspector port (9229, or the next free one) as it starts and binds it
 * seconds later: two started at once both pick 9229, and the later to bind
 * dies (Address already in use). Once `start` has returned, its wrangler
 * holds its port, and the next one picks another. The lock is the run's
 * Postgres's: the server releases it if the test process dies holding it.
 */
export async function oneWranglerStartAtATime<T>(start: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: inject('adminUrl') });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [WRANGLER_START_LOCK]);
    return await start();
  } finally {
    await client.end();
  }
}
