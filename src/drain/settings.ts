import { z } from 'zod';
import type { BuiltInJobSettings } from './handlers/built-in.js';
import { readAllowedHost } from './handlers/http-destination.js';
import { setting, type SettingValues } from './setting.js';
import { list, number, onOff, text, wholeNumber } from './setting-kinds.js';

/**
 * The settings both runtimes read, a Worker (as `createSkiplock` options
 * or its variables) and the Node worker (`skiplock work`): the database,
 * dev mode, how long history is kept, and the built-in `http` job.
 */
export const SHARED_SETTINGS = {
  databaseUrl: setting({
    variable: 'DATABASE_URL',
    kind: text('a Postgres connection string'),
    unset: 'required (a Worker may bind `HYPERDRIVE` instead)',
    secret: true,
    description:
      "the Postgres that holds the queue. On Workers a Neon URL: Neon's HTTP driver reaches no other Postgres, and a Worker refuses an address, localhost or a name without a domain here (bind `HYPERDRIVE`, with `localConnectionString` under `wrangler dev`, for any other)",
  }),
  devMode: setting({
    variable: 'SKIPLOCK_DEV',
    kind: onOff({ on: ['1'], off: ['0'] }),
    default: false,
    description:
      '`1` (as `npm start` sets it): the demo jobs `noop`, `sleep` and `fail`; on a Worker also no required secrets and a status-token secret derived from `ADMIN_TOKEN`',
  }),
  retentionSeconds: setting({
    variable: 'RETENTION_SECONDS',
    kind: number({ min: 0 }),
    default: 7 * 24 * 3600,
    description:
      "how long finished jobs and events are kept, in seconds (finished jobs go by whole days: at least this long, at most a day more); a queue's or job type's own retention wins ([operations.md](operations.md#retention))",
  }),
  statsRetentionDays: setting({
    variable: 'STATS_RETENTION_DAYS',
    kind: wholeNumber({ min: 1 }),
    // The daily attempt statistics outlive the jobs.
    default: 365,
    description: 'how many days the daily attempt statistics (`GET /v1/stats/daily`) are kept',
  }),
  httpAllowedHosts: setting({
    variable: 'HTTP_ALLOWED_HOSTS',
    kind: list(
      () => z.string().refine((entry) => readAllowedHost(entry) !== undefined),
      '[tenant=]host[:port] entries, comma-separated',
    ),
    unset: 'none: the `http` job calls nowhere',
    description:
      "where the built-in `http` job may deliver: a `*.` host allows its subdomains, a `tenant=` entry only that tenant's jobs (see [The http job](handlers.md#the-http-job))",
  }),
  httpSigningSecret: setting({
    variable: 'HTTP_SIGNING_SECRET',
    kind: text('any long random string'),
    unset: 'unsigned',
    secret: true,
    description:
      'signs `http` job deliveries (Standard Webhooks, a `whsec_` secret per tenant and endpoint derived from it)',
  }),
};

export type SharedSettings = SettingValues<typeof SHARED_SETTINGS>;

export interface JobSettings extends BuiltInJobSettings {
  retentionSeconds: number;
  statsRetentionDays: number;
}

/** What the drain and the built-in jobs take from the shared settings. */
export function jobSettings(shared: SharedSettings): JobSettings {
  return {
    devMode: shared.devMode,
    retentionSeconds: shared.retentionSeconds,
    statsRetentionDays: shared.statsRetentionDays,
    http: {
      allowedHosts: shared.httpAllowedHosts ?? [],
      ...(shared.httpSigningSecret === undefined ? {} : { signingSecret: shared.httpSigningSecret }),
    },
  };
}
