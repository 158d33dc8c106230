import { Client, neon, neonConfig } from '@neondatabase/serverless';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { applyLocalNeonConfig } from '../src/db/neon-local';
import { startNeonProxy, type NeonProxy } from '../src/local/neon-proxy';
import { createTestDatabase, type TestDatabase } from './support/database';
import { postgresAddressOf } from './support/postgres-address';

// Large against the machine's own latency, so each wait shows; the jitter would reorder messages if the line let it.
const ROUND_TRIP_MS = 60;
const JITTER_MS = 40;

let database: TestDatabase;
let proxy: NeonProxy;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: false });
  proxy = await startNeonProxy({
    postgres: postgresAddressOf(database.url),
    networkDelay: { roundTripMs: ROUND_TRIP_MS, jitterMs: JITTER_MS },
  });
  applyLocalNeonConfig(neonConfig, proxy.address);
  neonConfig.webSocketConstructor = WebSocket;
});

afterAll(async () => {
  await proxy.close();
  await database.drop();
});

describe('the Neon proxy with a round trip set', () => {
  it('answers SQL over HTTP no sooner than the round trip', async () => {
    const sql = neon(database.url);
    const started = performance.now();
    const rows = await sql.query('SELECT $1::int + 1 AS answer', [41]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(ROUND_TRIP_MS);
    expect(rows).toEqual([{ answer: 42 }]);
  });

  it('delays each WebSocket message both ways and keeps their order: a session of many round trips stays intact', async () => {
    const client = new Client(database.url);
    const connected = performance.now();
    await client.connect();
    try {
      // The startup alone is a round trip or more: the delay applies from the first message.
      expect(performance.now() - connected).toBeGreaterThanOrEqual(ROUND_TRIP_MS);
      await client.query('BEGIN');
      await client.query('CREATE TEMP TABLE seen (n int)');
      const queries = 20;
      const started = performance.now();
      // Queued on one connection: each is a round trip, and an answer out of order would break the protocol.
      const answers = await Promise.all(
        Array.from({ length: queries }, (_, n) => client.query('INSERT INTO seen VALUES ($1) RETURNING n', [n])),
      );
      expect(performance.now() - started).toBeGreaterThanOrEqual(queries * ROUND_TRIP_MS);
      expect(answers.map((answer) => answer.rows[0].n)).toEqual(Array.from({ length: queries }, (_, n) => n));
      const { rows } = await client.query('SELECT array_agg(n ORDER BY n) AS all FROM seen');
      expect(rows[0].all).toHaveLength(queries);
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
  });
});
