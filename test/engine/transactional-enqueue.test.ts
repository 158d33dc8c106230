import { neon, Pool } from '@neondatabase/serverless';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { clientQueryable, type PgLikeClient } from '../../src/db/pool';
import { claimBatch, enqueue, enqueueQuery } from '../../src/engine';
import type { DriverName } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/** A caller's own connection, of the kinds the engine can join: pg and Neon Pool clients. */
interface CallerClient {
  client: PgLikeClient & { query(text: string): Promise<unknown> };
  close(): Promise<void>;
}

const callerClients: Array<[DriverName, (url: string) => Promise<CallerClient>]> = [
  [
    'pg',
    async (url) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return { client, close: () => client.end() };
    },
  ],
  [
    'neon-ws',
    async (url) => {
      const pool = new Pool({ connectionString: url });
      const client = await pool.connect();
      return {
        client,
        close: async () => {
          client.release();
          await pool.end();
        },
      };
    },
  ],
];

describe.each(callerClients)('enqueue inside the caller’s %s transaction', (driver, connect) => {
  it('leaves no job on rollback, and exactly one, invisible until then, on commit', async () => {
    const { db, url } = await open(driver);
    const { client, close } = await connect(url);
    try {
      await client.query('BEGIN');
      await enqueue(clientQueryable(client), { queue: 'q', payload: 'rolled back' });
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      await enqueue(clientQueryable(client), { queue: 'q', payload: 'committed' });
      expect(await claimBatch(db, { max: 5, workerId: 'w' })).toEqual([]);
      await client.query('COMMIT');
    } finally {
      await close();
    }
    const claimed = await claimBatch(db, { max: 5, workerId: 'w' });
    expect(claimed.map((job) => job.payload)).toEqual(['committed']);
  });
});

describe('enqueue inside a Neon HTTP transaction batch', () => {
  it('commits with the caller’s statements, and rolls back with them', async () => {
    // The neon-http driver fixture also points the driver at the local proxy.
    const { db, url } = await open('neon-http');
    const sql = neon(url);
    await sql.query('CREATE TABLE orders (id int PRIMARY KEY)');
    const job = enqueueQuery({ queue: 'q', payload: 'with order 1' });
    await sql.transaction([sql.query('INSERT INTO orders VALUES (1)'), sql.query(job.text, [...job.params])]);
    // The same enqueue with a failing statement after it: all of it rolls back.
    const lost = enqueueQuery({ queue: 'q', payload: 'with duplicate order' });
    await expect(
      sql.transaction([sql.query(lost.text, [...lost.params]), sql.query('INSERT INTO orders VALUES (1)')]),
    ).rejects.toMatchObject({ code: '23505' });
    const claimed = await claimBatch(db, { max: 5, workerId: 'w' });
    expect(claimed.map((j) => j.payload)).toEqual(['with order 1']);
  });
});
