export type { Db, Query, Queryable, Row, SessionDb } from './types.js';
export { DatabaseError } from './errors.js';
export { clientQueryable, poolDb, type PgLikeClient, type PgLikeOptions, type PgLikePool } from './pool.js';
export { neonHttpDb } from './neon-http.js';
export { neonPoolDb } from './neon-ws.js';
