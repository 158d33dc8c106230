import pg from 'pg';
import { poolDb } from './pool.js';
import type { SessionDb } from './types.js';

export interface PgDbOptions {
  /** Connections the pool may open. On Workers through Hyperdrive keep it below 6. */
  max?: number;
  /**
   * Prepare the engine's statements once per connection (default on): a
   * claim then skips parsing and, once Postgres settles on a generic plan,
   * planning. Turn off behind a pooler that loses prepared statements
   * between transactions (PgBouncer before 1.21 in transaction mode).
   */
  preparedStatements?: boolean;
  /**
   * How long a connection may sit idle before the pool closes it; 0 keeps it
   * open for the pool's life. Default 10,000 ms (node-postgres's).
   */
  idleTimeoutMs?: number;
}

/**
 * node-postgres: the Node worker, the CLI, and Workers through Hyperdrive
 * (pass `env.HYPERDRIVE.connectionString`). pg's own type parsers are the
 * same as the Neon driver's, so rows look alike whichever driver read them.
 */
export function pgDb(connectionString: string, options: PgDbOptions = {}): SessionDb {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    idleTimeoutMillis: options.idleTimeoutMs ?? 10_000,
  });
  // An idle client whose server went away emits 'error'; without a listener Node exits.
  pool.on('error', () => {});
  return poolDb(pool, { preparedStatements: options.preparedStatements ?? true });
}

/**
 * node-postgres with a connection per statement (and per transaction), none
 * kept between them: for Workers over Hyperdrive, where the pool is
 * Cloudflare's (connecting is cheap) and a socket must not outlive the
 * request that opened it. Nothing to close.
 */
export function pgConnectionPerStatementDb(connectionString: string): SessionDb {
  const connect = async () => {
    const client = new pg.Client({ connectionString });
    client.on('error', () => {});
    await client.connect();
    return Object.assign(client, { release: () => void client.end().catch(() => {}) });
  };
  return poolDb({
    connect,
    async query(config) {
      const client = await connect();
      try {
        return await client.query(config);
      } finally {
        client.release();
      }
    },
    end: async () => {},
  });
}
