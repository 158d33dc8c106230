export type { Db, Query, Queryable, Row, SessionDb } from './types.js';
export { DatabaseError, toDatabaseError } from './errors.js';
export { clientQueryable, poolDb, type PgLikeClient, type PgLikePool } from './pool.js';
export { neonHttpDb } from './neon-http.js';
export { neonPoolDb } from './neon-ws.js';
export { UuidArray } from './uuid-array.js';
