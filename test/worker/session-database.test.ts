import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/types';
import { sessionDatabase } from './support/databases';

/** Thrown inside a transaction to make withTransaction roll it back. */
class Rollback extends Error {}

async function jobCount(db: Queryable, queue: string): Promise<number> {
  const [row] = await db.query<{ count: number }>({
    text: 'SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1',
    params: [queue],
  });
  return row?.count ?? 0;
}

function insertJob(db: Queryable, queue: string): Promise<unknown> {
  return db.query({ text: 'INSERT INTO skiplock.jobs (queue, type) VALUES ($1, $2)', params: [queue, 'worker-test'] });
}

/** The Worker tests share one database: a queue of its own keeps each test's rows apart. */
function uniqueQueue(): string {
  return `worker-test-${crypto.randomUUID()}`;
}

describe('sessionDatabase (Neon WebSocket Pool) in workerd', () => {
  it('commits a transaction', async () => {
    const database = sessionDatabase(env);
    const queue = uniqueQueue();
    try {
      await database.withTransaction((tx) => insertJob(tx, queue));

      expect(await jobCount(database, queue)).toBe(1);
    } finally {
      await database.close();
    }
  });

  it('rolls back a transaction whose work throws, leaving nothing', async () => {
    const database = sessionDatabase(env);
    const queue = uniqueQueue();
    try {
      const transaction = database.withTransaction(async (tx) => {
        await insertJob(tx, queue);
        expect(await jobCount(tx, queue)).toBe(1);
        throw new Rollback();
      });

      await expect(transaction).rejects.toBeInstanceOf(Rollback);
      expect(await jobCount(database, queue)).toBe(0);
    } finally {
      await database.close();
    }
  });

  it('refuses queries once closed', async () => {
    const database = sessionDatabase(env);
    await database.query({ text: 'SELECT 1', params: [] });

    await database.close();

    await expect(database.query({ text: 'SELECT 1', params: [] })).rejects.toThrow(/after calling end/);
  });
});
