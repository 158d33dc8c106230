import type { SettingVariables } from '../drain/setting.js';
import type { SHARED_SETTINGS } from '../drain/settings.js';
import type { RateLimiterBinding } from '../http/auth/failed-authentications.js';
import type { DrainerNamespace } from './fan-out.js';
import type { ClockNamespace } from './queue-clock.js';
import type { WORKER_SETTINGS } from './settings.js';

/**
 * The bindings the Worker factory reads (wrangler vars, secrets, `.dev.vars`):
 * the variables of its settings (SHARED_SETTINGS, WORKER_SETTINGS) and the
 * bindings below. Every one is optional here: an option given to
 * `createSkiplock` wins over its variable, and what is still missing is
 * refused at start with one line. Structural, so a project's own `Env` from
 * `wrangler types` fits it as it is.
 */
export interface SkiplockEnv
  extends SettingVariables<typeof SHARED_SETTINGS>,
    SettingVariables<typeof WORKER_SETTINGS>,
    SkiplockBindings {}

/** What WORKER_BINDINGS describes. */
export interface SkiplockBindings {
  HYPERDRIVE?: { readonly connectionString: string };
  SKIPLOCK_CLOCK?: ClockNamespace;
  SKIPLOCK_DRAINER?: DrainerNamespace;
  AUTH_RATE_LIMITER?: RateLimiterBinding;
  LOCAL_NEON_PROXY?: string;
}

/** The Worker's bindings beyond its settings, as docs/configuration.md lists them: how each is declared, and what it does. */
export const WORKER_BINDINGS: Readonly<Record<keyof SkiplockBindings, { declared: string; description: string }>> = {
  HYPERDRIVE: {
    declared: 'a Hyperdrive binding (`[[hyperdrive]]`)',
    description: 'a Postgres through Hyperdrive, for a non-Neon Postgres; wins over `DATABASE_URL`',
  },
  SKIPLOCK_CLOCK: {
    declared: 'a Durable Object namespace of `SkiplockClock`',
    description: 'the queue clock: cron ticks with nothing due run no statement; without it every tick drains',
  },
  SKIPLOCK_DRAINER: {
    declared: 'a Durable Object namespace of your `skiplock.Drainer` class',
    description:
      'helper drains: a drain with a backlog starts up to `DRAIN_FANOUT` - 1 of them; without it each drain works alone',
  },
  AUTH_RATE_LIMITER: {
    declared: 'a rate limit binding (`[[ratelimits]]`)',
    description:
      "counts failed authentications per client address across a location's isolates; without it they are counted per isolate only",
  },
  LOCAL_NEON_PROXY: {
    declared: 'a var, development only: `skiplock dev` (and `npm start`) sets it',
    description:
      '`host:port/<secret>` of the local Neon proxy that `skiplock dev` runs; the secret is new on every start',
  },
};
