import type { RateLimiterBinding } from '../http/auth/failed-authentications.js';
import type { DrainerNamespace } from './fan-out.js';
import type { ClockNamespace } from './queue-clock.js';

/**
 * The bindings the Worker factory reads (wrangler vars, secrets, `.dev.vars`).
 * Every one is optional here: an option given to `createSkiplock` wins over
 * its variable, and what is still missing is refused at start with one line.
 * Structural, so a project's own `Env` from `wrangler types` fits it as it is.
 */
export interface SkiplockEnv {
  /** Postgres connection string (a Neon URL in production). Secret. */
  DATABASE_URL?: string;
  /** A Hyperdrive binding for a non-Neon Postgres; it wins over DATABASE_URL. */
  HYPERDRIVE?: { readonly connectionString: string };
  /** The first admin API key: `Authorization: Bearer <ADMIN_TOKEN>` can create the others. Secret, 32 characters or more. */
  ADMIN_TOKEN?: string;
  /** Signs the browser status tokens of `statusUrl` (HMAC-SHA256). Secret, 32 characters or more; required outside dev. */
  STATUS_TOKEN_SECRET?: string;
  /** Browser origins allowed to call the API (CORS) and embed the status page, comma-separated. */
  CORS_ORIGINS?: string;
  /** Largest request body accepted, in bytes; default 1 MiB. */
  MAX_BODY_BYTES?: string;
  /** '1' under `npm start`: demo handlers, and a status-token secret derived from ADMIN_TOKEN. */
  SKIPLOCK_DEV?: string;
  /** Wall time of one cron drain, in seconds; default 25. */
  DRAIN_BUDGET_SECONDS?: string;
  /** Jobs a drain runs at once; default 25 (their fetches and the drain's statements share 6 connections, counted). */
  DRAIN_CONCURRENCY?: string;
  /** `on` (default) or `off`: drain right after an enqueue, within that request's `waitUntil`. */
  FAST_PATH?: string;
  /** Wall time of one fast-path drain, in seconds; default 20, at most 25. */
  FAST_PATH_BUDGET_SECONDS?: string;
  /** `free` (default) or `paid`: the plan whose subrequest cap (50 or 1,000 per invocation) a drain keeps under. */
  WORKERS_PLAN?: string;
  /** The subrequests one invocation may make, when your account's differs from its plan's. */
  SUBREQUEST_LIMIT?: string;
  /** With SKIPLOCK_CLOCK bound: the most seconds an idle queue goes without a drain; default 3600. */
  IDLE_RECHECK_SECONDS?: string;
  /**
   * The queue clock (a Durable Object namespace of `SkiplockClock`): cron
   * ticks with nothing due run no statement. Without it every tick drains.
   */
  SKIPLOCK_CLOCK?: ClockNamespace;
  /**
   * Helper drains (a Durable Object namespace of your `skiplock.Drainer`
   * class): a drain with a backlog starts up to DRAIN_FANOUT - 1 of them.
   * Without it each drain works alone.
   */
  SKIPLOCK_DRAINER?: DrainerNamespace;
  /** With SKIPLOCK_DRAINER bound: the most drains at once, the one that starts helpers included; default 2 (free) or 8 (paid), 1 for none. */
  DRAIN_FANOUT?: string;
  /** `warn` (default) or `info`: also one JSON line per request and per fast-path or helper drain. */
  LOG_LEVEL?: string;
  /** How long finished jobs are kept, in seconds; default 604800 (7 days). */
  RETENTION_SECONDS?: string;
  /** How many days the daily attempt statistics are kept; default 365. */
  STATS_RETENTION_DAYS?: string;
  /** Hosts the built-in `http` job may call, comma-separated. */
  HTTP_ALLOWED_HOSTS?: string;
  /** Signs `http` job deliveries. Secret. */
  HTTP_SIGNING_SECRET?: string;
  /**
   * A rate limit binding (`[[ratelimits]]`) that counts failed authentications
   * per client address across the isolates of a location; without it they
   * are counted per isolate only.
   */
  AUTH_RATE_LIMITER?: RateLimiterBinding;
  /** Development only: `host:port/<secret>` of the local Neon proxy that `npm start` runs (new each run). */
  LOCAL_NEON_PROXY?: string;
}
