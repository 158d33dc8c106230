/**
 * The one database interface the engine sees. Every driver (Neon HTTP, Neon
 * WebSocket, node-postgres) implements it, so the engine never knows which
 * client it has. Modeled on River's driver executor and pg-boss's
 * `executeSql`: a caller's own transaction can satisfy `Queryable` directly.
 */

/** A parameterized statement: SQL text with `$n` placeholders and its values. */
export interface Query {
  readonly text: string;
  /**
   * Values as node-postgres takes them. A `UuidArray` among them a driver may
   * send in binary; a client that does not prepare values the node-postgres
   * way (calling `toPostgres()`) sends `toPostgres()` in its place.
   */
  readonly params: readonly unknown[];
  /**
   * The statement's name, one per text (the engine names its statements).
   * A driver that may prepare statements on its connections does so under
   * this name: parsed once per connection, and planned once when Postgres
   * finds a generic plan as good. Others ignore it.
   */
  readonly name?: string;
}

export type Row = Record<string, unknown>;

/** The bottom level: run one parameterized statement, get its rows. */
export interface Queryable {
  query<R = Row>(query: Query): Promise<R[]>;
}

/** A database the engine owns: statements, atomic batches, and cleanup. */
export interface Db extends Queryable {
  /**
   * Runs the statements in order inside one transaction and returns each one's
   * rows. All commit or none does. Non-interactive on purpose: it is the form
   * that works over Neon's HTTP driver and Hyperdrive's transaction pooling.
   */
  transaction(queries: readonly Query[]): Promise<Row[][]>;
  /** Releases whatever connections this Db opened. Safe to call twice. */
  close(): Promise<void>;
}

/** A Db that can also hold one connection for an interactive transaction. */
export interface SessionDb extends Db {
  withTransaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
}
