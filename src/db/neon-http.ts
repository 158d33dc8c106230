import { neon } from '@neondatabase/serverless';
import { translateErrors } from './errors.js';
import type { Db, Query, Row } from './types.js';

/**
 * Neon over HTTP: one request per statement, and `transaction()` sends a batch
 * as one request that Neon runs in one transaction. No connection to open or
 * close, which makes it the cheapest driver for a single statement on Workers.
 */
export function neonHttpDb(connectionString: string): Db {
  const sql = neon(connectionString);
  return {
    query: <R = Row>({ text, params }: Query) =>
      translateErrors(async () => (await sql.query(text, [...params])) as R[]),
    transaction: (queries) =>
      translateErrors(
        async () => (await sql.transaction(queries.map(({ text, params }) => sql.query(text, [...params])))) as Row[][],
      ),
    close: async () => {},
  };
}
