import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Client, NeonDbError, Pool, neon, neonConfig, type NeonQueryFunction } from '@neondatabase/serverless';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { applyLocalNeonConfig } from '../src/db/neon-local';
import { startNeonProxy, type NeonProxy, type PostgresAddress } from '../src/local/neon-proxy';
import { createTestDatabase, type TestDatabase } from './support/database';
import { postgresAddressOf } from './support/postgres-address';
import { waitFor } from './support/wait-for';

/** Unique per run, so parallel test files and reruns never share a table. */
const table = `neon_proxy_${randomUUID().replaceAll('-', '')}`;

let database: TestDatabase;
let connectionString: string;
let postgres: PostgresAddress;
let proxy: NeonProxy;
let sql: NeonQueryFunction<false, false>;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: false });
  connectionString = database.url;
  postgres = postgresAddressOf(connectionString);
  proxy = await startNeonProxy({ postgres });
  applyLocalNeonConfig(neonConfig, proxy.address);
  neonConfig.webSocketConstructor = WebSocket;
  sql = neon(connectionString);
  await sql.query(`CREATE TABLE ${table} (id int PRIMARY KEY, label text NOT NULL)`);
});

afterAll(async () => {
  await proxy.close();
  await database.drop();
});

async function labels(): Promise<string[]> {
  const rows = await sql.query(`SELECT label FROM ${table} ORDER BY id`);
  return rows.map((row) => row.label as string);
}

async function clearTable(): Promise<void> {
  await sql.query(`DELETE FROM ${table}`);
}

/** Whether Postgres runs this statement now, for this test's database (seen past the proxy, on a connection of its own). */
async function postgresRuns(statement: string): Promise<boolean> {
  const observer = new pg.Client({ connectionString });
  await observer.connect();
  try {
    const { rowCount } = await observer.query(
      "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query = $1",
      [statement],
    );
    return rowCount! > 0;
  } finally {
    await observer.end();
  }
}

/** Fails the test instead of letting a hung promise run into the test timeout. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)),
  ]);
}

describe('neon() over HTTP', () => {
  it('runs sql.query with parameters', async () => {
    const rows = await sql.query('SELECT $1::int AS n, $2::text AS t, $3::text AS missing', [41, 'forty-one', null]);
    expect(rows).toEqual([{ n: 41, t: 'forty-one', missing: null }]);
  });

  it('runs tagged templates', async () => {
    const word = "it's";
    const rows = await sql`SELECT ${5}::int + 1 AS six, ${word} AS word`;
    expect(rows).toEqual([{ six: 6, word: "it's" }]);
  });

  it('returns values that the driver parses to the same types as Neon', async () => {
    const [row] = await sql.query(`
      SELECT 2147483647::int4 AS int4, 9007199254740993::int8 AS int8, 1.50::numeric AS numeric,
             true AS yes, false AS no, NULL::int AS nothing,
             ARRAY['a', 'b c', NULL, '"quoted"'] AS texts, ARRAY[1, 2, 3] AS ints,
             '{"a": [1, "x"]}'::json AS json, '{"b": {"c": null}}'::jsonb AS jsonb,
             '2024-05-06T07:08:09.123Z'::timestamptz AS at, '2024-01-02'::date AS day`);
    expect(row).toEqual({
      int4: 2147483647,
      int8: '9007199254740993',
      numeric: '1.50',
      yes: true,
      no: false,
      nothing: null,
      texts: ['a', 'b c', null, '"quoted"'],
      ints: [1, 2, 3],
      json: { a: [1, 'x'] },
      jsonb: { b: { c: null } },
      at: new Date('2024-05-06T07:08:09.123Z'),
      day: new Date(2024, 0, 2),
    });
  });

  it('round-trips bytea', async () => {
    const bytes = Buffer.from([0, 1, 127, 128, 255]);
    const [row] = await sql`SELECT ${bytes} AS bytes, octet_length(${bytes}) AS length`;
    expect(row?.length).toBe(5);
    expect(Buffer.from(row?.bytes as Uint8Array).equals(bytes)).toBe(true);
  });

  it('sends arrays, objects, dates and booleans as parameters', async () => {
    const at = new Date('2030-01-01T00:00:00.000Z');
    const rows = await sql.query(
      'SELECT $1::int[] AS ints, $2::text[] AS texts, $3::jsonb AS doc, $4::timestamptz AS at, $5::bool AS flag',
      [[1, 2], ['x,y', 'z"'], { nested: [true] }, at, false],
    );
    expect(rows).toEqual([{ ints: [1, 2], texts: ['x,y', 'z"'], doc: { nested: [true] }, at, flag: false }]);
  });

  it('returns full results', async () => {
    const result = await sql.query('SELECT 1 AS one, $1::text AS two', ['2'], { fullResults: true });
    expect(result.command).toBe('SELECT');
    expect(result.rowCount).toBe(1);
    expect(result.rows).toEqual([{ one: 1, two: '2' }]);
    expect(result.fields.map(({ name, dataTypeID }) => ({ name, dataTypeID }))).toEqual([
      { name: 'one', dataTypeID: 23 },
      { name: 'two', dataTypeID: 25 },
    ]);
  });

  it('reports command and row count for writes, and null for commands without one', async () => {
    const insert = await sql.query(`INSERT INTO ${table} VALUES (1, 'a'), (2, 'b')`, [], { fullResults: true });
    expect({ command: insert.command, rowCount: insert.rowCount }).toEqual({ command: 'INSERT', rowCount: 2 });
    const create = await sql.query(`CREATE TEMP TABLE ${table}_scratch (x int)`, [], { fullResults: true });
    expect({ command: create.command, rowCount: create.rowCount }).toEqual({ command: 'CREATE', rowCount: null });
    await clearTable();
  });

  it('returns rows as arrays in array mode', async () => {
    expect(await sql.query('SELECT 1 AS a, $1::text AS b', ['x'], { arrayMode: true })).toEqual([[1, 'x']]);
    const arrays = neon(connectionString, { arrayMode: true, fullResults: true });
    const result = await arrays`SELECT ${2}::int AS a`;
    expect(result.rows).toEqual([[2]]);
    expect(result.rowAsArray).toBe(true);
  });

  it('commits a transaction batch', async () => {
    const [inserted, counted] = await sql.transaction([
      sql.query(`INSERT INTO ${table} VALUES ($1, $2) RETURNING label`, [10, 'ten']),
      sql.query(`SELECT count(*)::int AS n FROM ${table}`),
    ]);
    expect(inserted).toEqual([{ label: 'ten' }]);
    expect(counted).toEqual([{ n: 1 }]);
    expect(await labels()).toEqual(['ten']);
    await clearTable();
  });

  it('rolls back the whole batch when a later statement fails', async () => {
    const batch = sql.transaction([
      sql.query(`INSERT INTO ${table} VALUES ($1, $2)`, [20, 'first']),
      sql.query(`INSERT INTO ${table} VALUES ($1, $2)`, [20, 'duplicate']),
    ]);
    const error = await batch.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NeonDbError);
    expect(error).toMatchObject({
      code: '23505',
      severity: 'ERROR',
      constraint: `${table}_pkey`,
      table,
      message: expect.stringContaining('duplicate key value violates unique constraint'),
      detail: 'Key (id)=(20) already exists.',
    });
    expect(await labels()).toEqual([]);
  });

  it('applies the batch isolation level and read-only mode', async () => {
    const [isolation, readOnly] = await sql.transaction(
      [sql`SHOW transaction_isolation`, sql`SHOW transaction_read_only`],
      { isolationLevel: 'Serializable', readOnly: true, deferrable: true },
    );
    expect(isolation).toEqual([{ transaction_isolation: 'serializable' }]);
    expect(readOnly).toEqual([{ transaction_read_only: 'on' }]);

    const write = sql.transaction([sql.query(`INSERT INTO ${table} VALUES (30, 'x')`)], { readOnly: true });
    await expect(write).rejects.toMatchObject({ code: '25006' });
  });

  it('reports Postgres errors with their SQLSTATE and position', async () => {
    const error = await sql.query('SELECT * FROM no_such_table_here').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NeonDbError);
    expect(error).toMatchObject({
      code: '42P01',
      severity: 'ERROR',
      position: '15',
      message: 'relation "no_such_table_here" does not exist',
    });
  });

  it('refuses several statements in one query, as the extended protocol does', async () => {
    await expect(sql.query('SELECT 1; SELECT 2')).rejects.toMatchObject({ code: '42601' });
  });

  it('does not leak a transaction left open by a lone BEGIN into later requests', async () => {
    await sql.query('BEGIN');
    // Had the open transaction been reused, this setting would last until it ends.
    await sql.query("SET LOCAL application_name = 'leaked'");
    const [row] = await sql.query("SELECT current_setting('application_name') AS name");
    expect(row?.name).not.toBe('leaked');
  });

  it('reports an unknown database from the connection string as a Postgres error', async () => {
    const elsewhere = new URL(connectionString);
    elsewhere.pathname = `/${table}_missing`;
    await expect(neon(elsewhere.href).query('SELECT 1')).rejects.toMatchObject({ code: '3D000' });
  });
});

describe('Pool and Client over WebSocket', () => {
  it('queries through a Pool', async () => {
    const pool = new Pool({ connectionString });
    try {
      const { rows } = await pool.query('SELECT $1::int * 2 AS doubled, NULL AS nothing', [21]);
      expect(rows).toEqual([{ doubled: 42, nothing: null }]);
    } finally {
      await pool.end();
    }
  });

  it('runs an interactive transaction and rolls it back', async () => {
    const client = new Client(connectionString);
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${table} VALUES ($1, $2)`, [40, 'uncommitted']);
      const inside = await client.query(`SELECT label FROM ${table}`);
      expect(inside.rows).toEqual([{ label: 'uncommitted' }]);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
    expect(await labels()).toEqual([]);
  });

  it('reports errors with their SQLSTATE and keeps the connection usable', async () => {
    const client = new Client(connectionString);
    await client.connect();
    try {
      await expect(client.query('SELECT * FROM no_such_table_here')).rejects.toMatchObject({ code: '42P01' });
      const { rows } = await client.query('SELECT 1 AS still_works');
      expect(rows).toEqual([{ still_works: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('closes the connection cleanly', async () => {
    const client = new Client(connectionString);
    await client.connect();
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
    await within(2000, client.end());
    await within(2000, ended);
  });

  it('refuses a Postgres address it was not configured with', async () => {
    const refused = new Promise<number | undefined>((resolve, reject) => {
      const socket = new WebSocket(`ws://${proxy.address}/v1?address=example.com:5432`);
      socket.once('unexpected-response', (_request, response) => resolve(response.statusCode));
      socket.once('open', () => reject(new Error('the proxy accepted a WebSocket to example.com')));
      socket.once('error', () => {});
    });
    expect(await refused).toBe(403);

    const elsewhere = new URL(connectionString);
    elsewhere.hostname = 'example.com';
    const client = new Client(elsewhere.href);
    client.on('error', () => {});
    await expect(within(2000, client.connect())).rejects.toThrow();
  });
});

/** A raw request with headers fetch would not let a test choose (Host), answered with its status and body. */
function rawRequest(
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest({ host: '127.0.0.1', port: proxy.port, path, method: 'POST', headers }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/** Opens a WebSocket to the proxy; resolves with the refusal's status, rejects if it opened. */
function refusedWebSocket(url: string, options: WebSocket.ClientOptions = {}): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, options);
    socket.once('unexpected-response', (_request, response) => resolve(response.statusCode));
    socket.once('open', () => {
      socket.terminate();
      reject(new Error(`the proxy accepted ${url}`));
    });
    socket.once('error', () => {});
  });
}

describe('who may use the proxy', () => {
  const secret = () => proxy.address.split('/')[1]!;
  const sqlHeaders = () => ({
    'Neon-Connection-String': connectionString,
    'Neon-Raw-Text-Output': 'true',
    'Content-Type': 'application/json',
  });
  const pipeAddress = () => `address=${postgres.host}:${postgres.port}`;

  it('refuses a WebSocket from a web page (any Origin), even with the secret', async () => {
    const url = `ws://${proxy.address}/v1?${pipeAddress()}`;
    expect(await refusedWebSocket(url, { origin: 'http://evil.example' })).toBe(403);
    expect(await refusedWebSocket(url, { origin: `http://127.0.0.1:${proxy.port}` })).toBe(403);
  });

  it('refuses SQL over HTTP from a web page, and under a foreign Host (DNS rebinding)', async () => {
    const body = JSON.stringify({ query: 'SELECT 1 AS one' });
    const host = `127.0.0.1:${proxy.port}`;
    const fromPage = await rawRequest(
      `/${secret()}/sql`,
      { ...sqlHeaders(), host, origin: 'http://evil.example' },
      body,
    );
    const rebound = await rawRequest(
      `/${secret()}/sql`,
      { ...sqlHeaders(), host: `rebind.evil.example:${proxy.port}` },
      body,
    );
    const allowed = await rawRequest(`/${secret()}/sql`, { ...sqlHeaders(), host }, body);

    expect(fromPage).toEqual({ status: 403, body: expect.stringMatching(/web pages/) });
    expect(rebound).toEqual({ status: 403, body: `this local proxy answers only to Host ${host}` });
    expect(allowed.status).toBe(200);
  });

  it('refuses a WebSocket under a foreign Host', async () => {
    const url = `ws://${proxy.address}/v1?${pipeAddress()}`;
    expect(await refusedWebSocket(url, { headers: { host: `rebind.evil.example:${proxy.port}` } })).toBe(403);
  });

  it('answers 404 to a request or upgrade without the per-run secret, or with a wrong one', async () => {
    const host = `127.0.0.1:${proxy.port}`;
    const body = JSON.stringify({ query: 'SELECT 1 AS one' });
    const wrong = `${secret().slice(0, -1)}${secret().endsWith('A') ? 'B' : 'A'}`;
    for (const path of ['/sql', `/${wrong}/sql`, `/sql/${secret()}`]) {
      expect(await rawRequest(path, { ...sqlHeaders(), host }, body), path).toEqual({ status: 404, body: 'not found' });
    }
    for (const path of ['/v1', `/${wrong}/v1`]) {
      expect(await refusedWebSocket(`ws://127.0.0.1:${proxy.port}${path}?${pipeAddress()}`), path).toBe(404);
    }
  });
});

describe('dropConnections()', () => {
  it('makes the next query of an open Pool client fail instead of hang', async () => {
    const pool = new Pool({ connectionString });
    pool.on('error', () => {});
    const client = await pool.connect();
    client.on('error', () => {});
    try {
      await client.query('SELECT 1');
      proxy.dropConnections();
      await expect(within(2000, client.query('SELECT 1'))).rejects.toThrow(/Connection terminated|not queryable/);
    } finally {
      client.release(true);
      await pool.end();
    }
  });

  it('fails an in-flight HTTP query instead of letting it run', async () => {
    // neon() queries are lazy: catch() sends this one now, and keeps its error for the assertion.
    const sleeping = sql.query('SELECT pg_sleep(30)').catch((error: unknown) => error);
    await waitFor('the pg_sleep query to run in Postgres', () => postgresRuns('SELECT pg_sleep(30)'));
    proxy.dropConnections();
    expect(await within(2000, sleeping)).toMatchObject({ message: 'Connection terminated unexpectedly', code: '' });
    // The proxy keeps serving: the broken connection is not reused.
    expect(await sql.query('SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
  });
});

describe('close()', () => {
  it('ends pools, sockets and the server', async () => {
    const other = await startNeonProxy({ postgres });
    const endpoint = `${other.url}/sql`;
    const headers = { 'Neon-Connection-String': connectionString, 'Neon-Raw-Text-Output': 'true' };
    const response = await fetch(endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query: 'SELECT 1 AS one' }),
    });
    expect(await response.json()).toMatchObject({
      rows: [{ one: '1' }],
      command: 'SELECT',
      rowCount: 1,
      rowAsArray: false,
    });

    await within(2000, other.close());
    await expect(fetch(endpoint, { method: 'POST', headers, body: '{}' })).rejects.toThrow();
  });
});
