import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import pg from 'pg';
import type { CustomTypesConfig, DatabaseError, FieldDef, Pool, PoolClient, QueryArrayConfig } from 'pg';
import type { PostgresAddress } from './ws-pipe.js';

/**
 * Neon's SQL-over-HTTP endpoint (what `neon()` from `@neondatabase/serverless`
 * posts to), run against a real Postgres with `pg`. Request, response and
 * error shapes follow Neon's proxy (proxy/src/serverless/sql_over_http.rs).
 */
export interface SqlOverHttpHandler {
  /** Answers one POST of a query or a batch. */
  handle(request: IncomingMessage, response: ServerResponse): Promise<void>;
  /** Abruptly cuts every Postgres connection, idle or running a query. */
  dropConnections(): void;
  /** Cuts every connection and ends every pool. */
  close(): Promise<void>;
}

// Neon's request headers; the batch ones are echoed in the response.
const CONNECTION_STRING = 'Neon-Connection-String';
const RAW_TEXT_OUTPUT = 'Neon-Raw-Text-Output';
const ARRAY_MODE = 'Neon-Array-Mode';
const BATCH_ISOLATION_LEVEL = 'Neon-Batch-Isolation-Level';
const BATCH_READ_ONLY = 'Neon-Batch-Read-Only';
const BATCH_DEFERRABLE = 'Neon-Batch-Deferrable';

const ISOLATION_LEVELS = {
  ReadUncommitted: 'READ UNCOMMITTED',
  ReadCommitted: 'READ COMMITTED',
  RepeatableRead: 'REPEATABLE READ',
  Serializable: 'SERIALIZABLE',
} as const;
type IsolationLevel = keyof typeof ISOLATION_LEVELS;

const MAX_REQUEST_BYTES = 10 * 1024 * 1024;
const CONNECTIONS_PER_DATABASE_USER = 5;
const IDLE_CONNECTION_TIMEOUT_MS = 30_000;

/** Hands every value over as the text Postgres sent, for the driver's own type parsers. */
const RAW_TEXT_TYPES: CustomTypesConfig = { getTypeParser: () => (value: string) => value };

type PgText = string | null;

interface QueryData {
  query: string;
  params: PgText[];
  /** Overrides the `Neon-Array-Mode` header for this query. */
  arrayMode: boolean | undefined;
}

type Payload = { batch: false; query: QueryData } | { batch: true; queries: QueryData[] };

interface BatchOptions {
  isolationLevel: IsolationLevel | undefined;
  readOnly: boolean;
  deferrable: boolean;
}

interface RequestOptions {
  connectionString: string;
  defaultArrayMode: boolean;
  batch: BatchOptions;
}

interface QueryResultJson {
  rowAsArray: boolean;
  fields: FieldDef[];
  rows: PgText[][] | Record<string, PgText>[];
  command: string;
  rowCount: number | null;
}

/** A request Neon would refuse before reaching Postgres. */
class ProxyRequestError extends Error {
  override readonly name = 'ProxyRequestError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** pg's query config lacks `queryMode` in its types, though pg supports it. */
interface ExtendedQueryArrayConfig extends QueryArrayConfig<PgText[]> {
  /**
   * Neon runs every query with the extended protocol, which allows exactly one
   * statement: `SELECT 1; SELECT 2` must fail here too, not run both.
   */
  queryMode: 'extended';
}

export function createSqlOverHttpHandler(postgres: PostgresAddress): SqlOverHttpHandler {
  const pools = new Map<string, Pool>();
  const postgresSockets = new Set<Socket>();

  const poolFor = (connectionString: string): Pool => {
    const credentials = credentialsFrom(connectionString);
    const key = JSON.stringify([credentials.user, credentials.password, credentials.database]);
    let pool = pools.get(key);
    if (pool === undefined) {
      pool = new pg.Pool({
        ...credentials,
        host: postgres.host,
        port: postgres.port,
        max: CONNECTIONS_PER_DATABASE_USER,
        idleTimeoutMillis: IDLE_CONNECTION_TIMEOUT_MS,
        // Owning the sockets is what lets dropConnections() cut them mid-query.
        stream: () => {
          const socket = new Socket();
          postgresSockets.add(socket);
          socket.once('close', () => postgresSockets.delete(socket));
          return socket;
        },
      });
      // A broken idle client emits 'error' on the pool, a broken busy one on
      // itself; without listeners Node would exit. The pool drops broken idle
      // clients itself, and a busy one's query rejects, which is reported.
      pool.on('error', () => {});
      pool.on('connect', (client) => client.on('error', () => {}));
      pools.set(key, pool);
    }
    return pool;
  };

  const dropConnections = (): void => {
    for (const socket of postgresSockets) socket.destroy();
  };

  return {
    async handle(request, response) {
      try {
        const options = requestOptions(request.headers);
        const payload = parsePayload(await readBody(request));
        const pool = poolFor(options.connectionString);
        const body = payload.batch
          ? { results: await runBatch(pool, payload.queries, options) }
          : await runSingle(pool, payload.query, options);
        response.writeHead(200, { 'Content-Type': 'application/json', ...batchHeaders(payload, options) });
        response.end(JSON.stringify(body));
      } catch (error) {
        const { status, body } = errorResponse(error);
        response.writeHead(status, { 'Content-Type': 'application/json' });
        response.end(JSON.stringify(body));
      }
    },
    dropConnections,
    async close() {
      // Shutdown cuts running queries rather than waiting for them.
      dropConnections();
      await Promise.all([...pools.values()].map((pool) => pool.end()));
      pools.clear();
    },
  };
}

function requestOptions(headers: IncomingHttpHeaders): RequestOptions {
  const connectionString = header(headers, CONNECTION_STRING);
  if (connectionString === undefined) {
    throw new ProxyRequestError(400, `missing ${CONNECTION_STRING} header`);
  }
  // Neon answers with JSON-typed values unless this is 'true'; the driver always
  // sends 'true', and this proxy only implements that text output.
  if (header(headers, RAW_TEXT_OUTPUT) !== 'true') {
    throw new ProxyRequestError(400, `this local proxy only supports ${RAW_TEXT_OUTPUT}: true`);
  }
  const isolationLevel = header(headers, BATCH_ISOLATION_LEVEL);
  if (isolationLevel !== undefined && !isIsolationLevel(isolationLevel)) {
    throw new ProxyRequestError(400, 'invalid isolation level');
  }
  // Like Neon, anything other than exactly 'true' means false.
  return {
    connectionString,
    defaultArrayMode: header(headers, ARRAY_MODE) === 'true',
    batch: {
      isolationLevel,
      readOnly: header(headers, BATCH_READ_ONLY) === 'true',
      deferrable: header(headers, BATCH_DEFERRABLE) === 'true',
    },
  };
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

function isIsolationLevel(value: string): value is IsolationLevel {
  return Object.hasOwn(ISOLATION_LEVELS, value);
}

/** Neon reports a batch's transaction settings back in the response headers. */
function batchHeaders(payload: Payload, { batch }: RequestOptions): Record<string, string> {
  if (!payload.batch) return {};
  return {
    ...(batch.readOnly ? { [BATCH_READ_ONLY]: 'true' } : {}),
    ...(batch.deferrable ? { [BATCH_DEFERRABLE]: 'true' } : {}),
    ...(batch.isolationLevel === undefined ? {} : { [BATCH_ISOLATION_LEVEL]: batch.isolationLevel }),
  };
}

/**
 * Only the user, password and database are taken from the connection string:
 * its host names the database in the cloud, while this proxy serves one local Postgres.
 */
function credentialsFrom(connectionString: string): { user: string; password: string; database: string } {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new ProxyRequestError(400, `${CONNECTION_STRING} is not a valid URL`);
  }
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!['postgres:', 'postgresql:'].includes(url.protocol) || url.username === '' || database === '') {
    throw new ProxyRequestError(400, `${CONNECTION_STRING} must be postgresql://user[:password]@host/database`);
  }
  return {
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database,
  };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Read to the end even when too large: abandoning the request would destroy
  // the socket before the 413 response could be written.
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_REQUEST_BYTES) chunks.push(chunk);
  }
  if (size > MAX_REQUEST_BYTES) {
    throw new ProxyRequestError(413, `request is too large (max is ${MAX_REQUEST_BYTES} bytes)`);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `{query, params?, arrayMode?}` for one query, `{queries: [...]}` for a batch. */
function parsePayload(text: string): Payload {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ProxyRequestError(400, `request body is not JSON: ${(error as Error).message}`);
  }
  if (isObject(json) && 'query' in json) return { batch: false, query: parseQueryData(json) };
  if (isObject(json) && Array.isArray(json.queries)) {
    return { batch: true, queries: json.queries.map(parseQueryData) };
  }
  throw new ProxyRequestError(400, 'request body must be {"query": ..., "params": [...]} or {"queries": [...]}');
}

function parseQueryData(json: unknown): QueryData {
  if (!isObject(json) || typeof json.query !== 'string') {
    throw new ProxyRequestError(400, 'each query must be an object with a "query" string');
  }
  const params = json.params ?? [];
  if (!Array.isArray(params)) throw new ProxyRequestError(400, '"params" must be an array');
  if (json.arrayMode !== undefined && typeof json.arrayMode !== 'boolean') {
    throw new ProxyRequestError(400, '"arrayMode" must be a boolean');
  }
  return { query: json.query, params: params.map(paramText), arrayMode: json.arrayMode };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The driver sends every parameter as text already, but Neon also accepts JSON
 * values and converts them to Postgres text (proxy/src/serverless/json.rs).
 */
function paramText(value: unknown): PgText {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return arrayLiteral(value);
  return JSON.stringify(value);
}

/** A JSON array as a Postgres array literal; elements are quoted the JSON way, which Postgres reads. */
function arrayLiteral(values: readonly unknown[]): string {
  const elements = values.map((value) => {
    if (value === null || value === undefined) return 'NULL';
    if (Array.isArray(value)) return arrayLiteral(value);
    return JSON.stringify(typeof value === 'object' ? JSON.stringify(value) : value);
  });
  return `{${elements.join(',')}}`;
}

async function runSingle(pool: Pool, query: QueryData, options: RequestOptions): Promise<QueryResultJson> {
  const client = await connect(pool);
  let reusable = false;
  try {
    const result = await runQuery(client, query, options.defaultArrayMode);
    // Like Neon, only a connection back at idle is reused: a lone `BEGIN` must
    // not leak its open transaction into the next request.
    reusable = client.getTransactionStatus() === 'I';
    return result;
  } finally {
    client.release(!reusable);
  }
}

/** Runs the queries in one transaction, committed only if all of them succeed. */
async function runBatch(
  pool: Pool,
  queries: readonly QueryData[],
  options: RequestOptions,
): Promise<QueryResultJson[]> {
  const client = await connect(pool);
  let reusable = false;
  try {
    await client.query(startTransactionStatement(options.batch));
    const results: QueryResultJson[] = [];
    try {
      for (const query of queries) results.push(await runQuery(client, query, options.defaultArrayMode));
    } catch (error) {
      reusable = await rollback(client);
      throw error;
    }
    await client.query('COMMIT');
    reusable = client.getTransactionStatus() === 'I';
    return results;
  } finally {
    client.release(!reusable);
  }
}

/** Whether the rollback worked; if not, the connection is dropped and the query's error still reported. */
async function rollback(client: PoolClient): Promise<boolean> {
  try {
    await client.query('ROLLBACK');
    return true;
  } catch {
    return false;
  }
}

/** Built only from fixed keywords, so no user input reaches the SQL text. */
function startTransactionStatement({ isolationLevel, readOnly, deferrable }: BatchOptions): string {
  const modes = [
    ...(isolationLevel === undefined ? [] : [`ISOLATION LEVEL ${ISOLATION_LEVELS[isolationLevel]}`]),
    ...(readOnly ? ['READ ONLY'] : []),
    ...(deferrable ? ['DEFERRABLE'] : []),
  ];
  return ['START TRANSACTION', modes.join(', ')].filter(Boolean).join(' ');
}

async function runQuery(client: PoolClient, query: QueryData, defaultArrayMode: boolean): Promise<QueryResultJson> {
  const config: ExtendedQueryArrayConfig = {
    text: query.query,
    values: query.params,
    rowMode: 'array',
    types: RAW_TEXT_TYPES,
    queryMode: 'extended',
  };
  const result = await client.query<PgText[]>(config);
  const rowAsArray = query.arrayMode ?? defaultArrayMode;
  return {
    rowAsArray,
    fields: result.fields.map(({ name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier }) => ({
      name,
      dataTypeID,
      tableID,
      columnID,
      dataTypeSize,
      dataTypeModifier,
      format: 'text',
    })),
    rows: rowAsArray
      ? result.rows
      : result.rows.map((row) =>
          Object.fromEntries(result.fields.map(({ name }, index) => [name, row[index] ?? null])),
        ),
    // Neon reports the command tag's first word, and its row count or null (as for CREATE TABLE).
    command: result.command ?? '',
    rowCount: result.rowCount,
  };
}

/**
 * Neon answers a refused login (wrong password, unknown database) with 400 and
 * the Postgres error, and an unreachable database with 500.
 */
async function connect(pool: Pool): Promise<PoolClient> {
  try {
    return await pool.connect();
  } catch (error) {
    if (error instanceof pg.DatabaseError) throw error;
    throw new ProxyRequestError(500, `could not connect to Postgres: ${(error as Error).message}`);
  }
}

/** The fields of a Postgres error that Neon forwards, all optional text. */
type PostgresErrorField =
  | 'code'
  | 'severity'
  | 'detail'
  | 'hint'
  | 'position'
  | 'internalPosition'
  | 'internalQuery'
  | 'where'
  | 'schema'
  | 'table'
  | 'column'
  | 'dataType'
  | 'constraint'
  | 'file'
  | 'line'
  | 'routine';

/**
 * The body Neon sends with an error: every field the driver copies onto its
 * NeonDbError, null when Postgres did not set it. `code` and `severity` are
 * empty strings when the error did not come from Postgres.
 */
function errorResponse(error: unknown): { status: number; body: Record<string, string | null> } {
  const postgresError: DatabaseError | undefined = error instanceof pg.DatabaseError ? error : undefined;
  const message = error instanceof Error ? error.message : String(error);
  // Postgres errors are the client's (400); so are broken connections mid-query, as in Neon.
  const status = error instanceof ProxyRequestError ? error.status : 400;
  const field = (name: PostgresErrorField): string | null => postgresError?.[name] ?? null;
  return {
    status,
    body: {
      message,
      code: field('code') ?? '',
      detail: field('detail'),
      hint: field('hint'),
      position: field('position'),
      internalPosition: field('internalPosition'),
      internalQuery: field('internalQuery'),
      severity: field('severity') ?? '',
      where: field('where'),
      table: field('table'),
      column: field('column'),
      schema: field('schema'),
      dataType: field('dataType'),
      constraint: field('constraint'),
      file: field('file'),
      line: field('line'),
      routine: field('routine'),
    },
  };
}
