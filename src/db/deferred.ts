import type { Query, Queryable, Row, SessionDb } from './types.js';

/**
 * A database whose driver is made on first use: a Worker bundle that never
 * uses node-postgres (no Hyperdrive binding) never runs its module code.
 */
export function deferredDb(open: () => Promise<SessionDb>): SessionDb {
  let opened: Promise<SessionDb> | undefined;
  const db = () => (opened ??= open());
  return {
    query: async <R = Row>(query: Query) => (await db()).query<R>(query),
    transaction: async (queries: readonly Query[]) => (await db()).transaction(queries),
    withTransaction: async <T>(work: (tx: Queryable) => Promise<T>) => (await db()).withTransaction(work),
    close: async () => {
      if (opened !== undefined) await (await opened).close();
    },
  };
}
