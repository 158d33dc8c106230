import type { Db } from '../../src/db/types';
import type { AppDeps } from '../../src/http/context';
import { createApp } from '../../src/http/app';

/**
 * The HTTP API over `db`, as a Worker serves it, with `adminToken` as its
 * admin token; `deps` adds to what it is given (a session database for the
 * routes that open one, tracing).
 */
export function apiOver(db: Db, adminToken: string, deps: Partial<AppDeps> = {}) {
  return createApp({
    settings: () => ({
      adminToken,
      statusTokenSecret: undefined,
      devMode: false,
      corsOrigins: [],
      maxBodyBytes: 1 << 20,
      logRequests: false,
    }),
    database: () => db,
    sessionDatabase: () => {
      throw new Error('this test opens no session');
    },
    ...deps,
  });
}
