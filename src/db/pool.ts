import { translateErrors } from './errors.js';
import type { Query, Queryable, Row, SessionDb } from './types.js';
import { UuidArray } from './uuid-array.js';

/** A statement as node-postgres and Neon's WebSocket driver take it. */
export interface PgLikeQueryConfig {
  text: string;
  values: unknown[];
  /** Given, the driver prepares the statement under this name on each connection. */
  name?: string;
}

/**
 * The shape shared by node-postgres and Neon's WebSocket `Pool` (Neon's is a
 * port of pg's), so both drivers are this one adapter with a different pool.
 */
export interface PgLikeClient {
  query(config: PgLikeQueryConfig): Promise<{ rows: unknown[] }>;
}
export interface PgLikePoolClient extends PgLikeClient {
  release(destroy?: boolean | Error): void;
}
export interface PgLikePool extends PgLikeClient {
  connect(): Promise<PgLikePoolClient>;
  end(): Promise<void>;
}

export interface PgLikeOptions {
  /**
   * Run named statements as named prepared statements. Off for a connection
   * that may sit behind a pooler which does not keep them across
   * transactions (PgBouncer before 1.21 in transaction mode).
   */
  preparedStatements?: boolean;
}

/** node-postgres and Neon's WebSocket driver send bytes as a binary parameter, read by the type's binary input. */
function wireValue(param: unknown): unknown {
  return param instanceof UuidArray ? (param.binary() ?? param) : param;
}

function statement({ text, params, name }: Query, options: PgLikeOptions): PgLikeQueryConfig {
  const values = params.map(wireValue);
  return options.preparedStatements && name !== undefined ? { name, text, values } : { text, values };
}

/**
 * Adapts a caller's own client (a pg `Client`, a Neon `Client`, or a client
 * checked out of a pool inside the caller's transaction) so the engine's
 * statements run in that connection: this is transactional enqueue.
 */
export function clientQueryable(client: PgLikeClient, options: PgLikeOptions = {}): Queryable {
  return {
    query: <R = Row>(query: Query) =>
      translateErrors(async () => (await client.query(statement(query, options))).rows as R[]),
  };
}

/** A SessionDb over a pool: statements go to any connection, transactions hold one. */
export function poolDb(pool: PgLikePool, options: PgLikeOptions = {}): SessionDb {
  let closed: Promise<void> | undefined;

  async function withTransaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await translateErrors(() => pool.connect());
    const tx = clientQueryable(client, options);
    let broken: unknown;
    try {
      await tx.query({ text: 'BEGIN', params: [] });
      const result = await work(tx);
      await tx.query({ text: 'COMMIT', params: [] });
      return result;
    } catch (error) {
      // A failed ROLLBACK means the connection itself is gone: drop it from the pool.
      await tx.query({ text: 'ROLLBACK', params: [] }).catch((rollbackError: unknown) => {
        broken = rollbackError;
      });
      throw error;
    } finally {
      client.release(broken !== undefined);
    }
  }

  return {
    query: <R = Row>(query: Query) =>
      translateErrors(async () => (await pool.query(statement(query, options))).rows as R[]),
    transaction: (queries) =>
      withTransaction(async (tx) => {
        const results: Row[][] = [];
        for (const query of queries) results.push(await tx.query(query));
        return results;
      }),
    withTransaction,
    close: () => (closed ??= pool.end()),
  };
}
