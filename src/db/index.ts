export type { Db, Query, Queryable, Row, SessionDb } from './types';
export { DatabaseError, toDatabaseError } from './errors';
export { clientQueryable, poolDb, type PgLikeClient, type PgLikePool } from './pool';
export { neonHttpDb } from './neon-http';
export { neonPoolDb } from './neon-ws';
