import { neon, Pool } from '@neondatabase/serverless';
import { describe, expect, it } from 'vitest';
import { clientQueryable } from '../../src/db/pool';
import { claimBatch, enqueue, enqueueQuery } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

describe('transactional enqueue with the Neon driver', () => {
  it('puts the enqueue in a neon() HTTP transaction batch next to the caller’s own statements', async () => {
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

  it('enqueues through a Neon Pool client inside BEGIN ... ROLLBACK / COMMIT', async () => {
    const { db, url } = await open('neon-ws');
    const pool = new Pool({ connectionString: url });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await enqueue(clientQueryable(client), { queue: 'q', payload: 'rolled back' });
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      await enqueue(clientQueryable(client), { queue: 'q', payload: 'committed' });
      await client.query('COMMIT');
    } finally {
      client.release();
      await pool.end();
    }
    const claimed = await claimBatch(db, { max: 5, workerId: 'w' });
    expect(claimed.map((j) => j.payload)).toEqual(['committed']);
  });
});
