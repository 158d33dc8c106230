import type { Db, Query, Queryable, Row, SessionDb } from './types.js';

/**
 * A database whose driver is made on first use: a Worker runs no driver's
 * module code while it starts, and a bundle that never uses node-postgres
 * (no Hyperdrive binding) never runs its module code at all.
 */
export function deferredDb(open: () => Promise<Db>): Db {
  return deferred(open).db;
}

/** `deferredDb` that also holds a connection for an interactive transaction. */
export function deferredSessionDb(open: () => Promise<SessionDb>): SessionDb {
  const { db, opened } = deferred(open);
  return {
    ...db,
    withTransaction: async <T>(work: (tx: Queryable) => Promise<T>) => (await opened()).withTransaction(work),
  };
}

function deferred<D extends Db>(open: () => Promise<D>): { db: Db; opened: () => Promise<D> } {
  let opening: Promise<D> | undefined;
  const opened = () => (opening ??= open());
  return {
    opened,
    db: {
      query: async <R = Row>(query: Query) => (await opened()).query<R>(query),
      transaction: async (queries: readonly Query[]) => (await opened()).transaction(queries),
      close: async () => {
        if (opening !== undefined) await (await opening).close();
      },
    },
  };
}
