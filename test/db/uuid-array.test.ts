import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { clientQueryable } from '../../src/db';
import { UuidArray } from '../../src/db/uuid-array';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

const uuids = [
  '0190b8c4-7d1e-7a3b-9c2d-4e5f60718293',
  'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
  '00000000-0000-0000-0000-000000000000',
];
const asText = [
  '0190b8c4-7d1e-7a3b-9c2d-4e5f60718293',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '00000000-0000-0000-0000-000000000000',
];

describe('UuidArray', () => {
  it("writes the bytes Postgres's own array_send writes for the same uuid[]", async () => {
    const { db } = await open('pg');
    for (const values of [uuids, []]) {
      const [row] = await db.query<{ sent: Buffer }>({
        text: 'SELECT array_send($1::text[]::uuid[]) AS sent',
        params: [values],
      });
      expect(Buffer.from(new UuidArray(values).binary()!)).toEqual(row!.sent);
    }
  });

  it('has no binary form for a uuid Postgres writes otherwise, nor for what is no uuid', () => {
    for (const odd of [
      'a0eebc999c0b4ef8bb6d6bb9bd380a11',
      '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g',
      'a0eebc99x9c0b-4ef8-bb6d-6bb9bd380a11',
      'é0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    ]) {
      expect(new UuidArray([uuids[0]!, odd]).binary()).toBeUndefined();
    }
  });

  describe.each(DRIVERS)('over %s', (driver) => {
    it('reaches Postgres as the same uuid[], in any form Postgres reads, and a malformed one fails as in text', async () => {
      const { db } = await open(driver);
      const read = (values: string[]) =>
        db.query<{ a: string[] }>({ text: 'SELECT $1::uuid[]::text[] AS a', params: [new UuidArray(values)] });
      expect((await read(uuids))[0]!.a).toEqual(asText);
      expect((await read([]))[0]!.a).toEqual([]);
      expect((await read(['{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}']))[0]!.a).toEqual([asText[1]]);
      await expect(read([uuids[0]!, 'not-a-uuid'])).rejects.toThrow(/uuid/);
    });
  });

  it("reaches Postgres through a caller's own node-postgres client, which knows nothing of it", async () => {
    const { url } = await open('pg');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT $1::uuid[]::text[] AS a', [new UuidArray(uuids)]);
      expect(rows[0].a).toEqual(asText);
      const [row] = await clientQueryable(client).query<{ a: string[] }>({
        text: 'SELECT $1::uuid[]::text[] AS a',
        params: [new UuidArray(uuids)],
      });
      expect(row!.a).toEqual(asText);
    } finally {
      await client.end();
    }
  });
});
