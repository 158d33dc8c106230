/** Bindings and variables of the Worker (wrangler.toml `[vars]`, secrets, `.dev.vars`). */
export interface Env {
  /** Postgres connection string (a Neon URL in production). Secret. */
  DATABASE_URL: string;
  /** The first admin API key. Secret. */
  ADMIN_TOKEN?: string;
  /**
   * Development only: `host:port` of the local Neon-compatible proxy that
   * `npm start` runs, so the real Neon driver reaches a local Postgres.
   */
  LOCAL_NEON_PROXY?: string;
  /** Optional Hyperdrive binding for a non-Neon Postgres. */
  HYPERDRIVE?: Hyperdrive;
}
