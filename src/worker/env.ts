import type { SettingVariables } from '../drain/setting.js';
import type { SHARED_SETTINGS } from '../drain/settings.js';
import type { RateLimiterBinding } from '../http/auth/failed-authentications.js';
import type { DrainerNamespace } from './fan-out.js';
import type { ClockNamespace } from './queue-clock.js';
import type { WORKER_SETTINGS } from './settings.js';

/**
 * The bindings the Worker factory reads (wrangler vars, secrets, `.dev.vars`):
 * the variables of its settings (SHARED_SETTINGS, WORKER_SETTINGS) and its
 * bindings. Every one is optional here: an option given to
 * `createSkiplock` wins over its variable, and what is still missing is
 * refused at start with one line. Structural, so a project's own `Env` from
 * `wrangler types` fits it as it is.
 */
export interface SkiplockEnv
  extends SettingVariables<typeof SHARED_SETTINGS>,
    SettingVariables<typeof WORKER_SETTINGS>,
    SkiplockBindings {}

/** The Worker's bindings beyond its settings. */
export interface SkiplockBindings {
  /** A Hyperdrive binding for a non-Neon Postgres; it wins over DATABASE_URL. */
  HYPERDRIVE?: { readonly connectionString: string };
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
  /**
   * A rate limit binding (`[[ratelimits]]`) that counts failed authentications
   * per client address across the isolates of a location; without it they
   * are counted per isolate only.
   */
  AUTH_RATE_LIMITER?: RateLimiterBinding;
  /** Development only: `host:port/<secret>` of the local Neon proxy that `npm start` runs (new each run). */
  LOCAL_NEON_PROXY?: string;
}
