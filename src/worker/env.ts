/** Bindings and variables of the Worker (wrangler.toml `[vars]`, secrets, `.dev.vars`). */
export interface Env {
  /** Postgres connection string (a Neon URL in production). Secret. */
  DATABASE_URL: string;
  /** The first admin API key: `Authorization: Bearer <ADMIN_TOKEN>` can create the others. Secret. */
  ADMIN_TOKEN?: string;
  /**
   * Signs the browser status tokens of `statusUrl` (HMAC-SHA256). Secret; any
   * long random string. Without it, `npm start` (SKIPLOCK_DEV) derives one from
   * ADMIN_TOKEN, and elsewhere enqueue answers `statusUrl: null`.
   */
  STATUS_TOKEN_SECRET?: string;
  /**
   * Browser origins allowed to call the API (CORS), comma-separated, e.g.
   * `https://app.example.com,https://admin.example.com`. None when unset.
   */
  CORS_ORIGINS?: string;
  /** Largest request body accepted, in bytes; default 1 MiB (1048576). Larger bodies get 413. */
  MAX_BODY_BYTES?: string;
  /** '1' under `npm start`: local development defaults (demo handlers, a derived status-token secret). */
  SKIPLOCK_DEV?: string;
  // The drain (src/worker/drain.ts). All optional; the defaults suit a `* * * * *` Cron Trigger.
  /** Wall time of one cron drain, in seconds; default 25 (the Cron Trigger allows 30 s CPU, 15 min wall). */
  DRAIN_BUDGET_SECONDS?: string;
  /** Jobs a drain runs at once; default 5, so they and the drain fit in Workers' 6 connections. */
  DRAIN_CONCURRENCY?: string;
  /** `on` (default) or `off`: drain right after an enqueue, within that request's `waitUntil`. */
  FAST_PATH?: string;
  /** Wall time of one fast-path drain, in seconds; default 20, at most 25 (`waitUntil` ends 30 s after the response). */
  FAST_PATH_BUDGET_SECONDS?: string;
  /** How long finished jobs are kept before pruning, in seconds; default 604800 (7 days). */
  RETENTION_SECONDS?: string;
  /** Hosts the built-in `http` job may call, comma-separated: `api.example.com,*.hooks.example.com`. None when unset. */
  HTTP_ALLOWED_HOSTS?: string;
  /** Signs `http` job deliveries (`skiplock-signature` header, HMAC-SHA256). Secret. Unsigned when unset. */
  HTTP_SIGNING_SECRET?: string;
  /**
   * Development only: `host:port` of the local Neon-compatible proxy that
   * `npm start` runs, so the real Neon driver reaches a local Postgres.
   */
  LOCAL_NEON_PROXY?: string;
  /** Optional Hyperdrive binding for a non-Neon Postgres. */
  HYPERDRIVE?: Hyperdrive;
}
