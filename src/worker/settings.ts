import { z } from 'zod';
import {
  readSettings,
  setting,
  type DerivedDefault,
  type SettingOptions,
  type SettingValues,
} from '../drain/setting.js';
import { list, number, oneOf, onOff, text, wholeNumber, wholeNumberOr } from '../drain/setting-kinds.js';
import { AUTO_BATCH_MAX_SLOTS } from '../drain/claim-policy.js';
import { jobSettings, SHARED_SETTINGS, type JobSettings } from '../drain/settings.js';
import type { ApiSettings } from '../http/context.js';
import type { SkiplockEnv } from './env.js';
import { ConfigurationError } from './configuration-error.js';

export { ConfigurationError };

/**
 * The shortest ADMIN_TOKEN and STATUS_TOKEN_SECRET accepted outside dev: 32
 * characters of a random string hold more than 128 bits, which no one
 * guesses, whatever limits requests.
 */
export const MIN_SECRET_LENGTH = 32;

/** Subrequests per invocation by plan (Cloudflare's limits; a Paid account can raise its own: set SUBREQUEST_LIMIT). */
const SUBREQUESTS_OF_PLAN = { free: 50, paid: 1000 } as const;
type WorkersPlan = keyof typeof SUBREQUESTS_OF_PLAN;
/**
 * Drains at once by plan: a Free account's invocations get 10 ms of CPU and
 * its Durable Objects 100,000 requests a day, so it doubles; Paid goes to 8,
 * each with its own budget, 6 connections and subrequests.
 */
const FANOUT_OF_PLAN = { free: 2, paid: 8 } as const;

/** A default that follows WORKERS_PLAN. */
function byPlan(table: Readonly<Record<WorkersPlan, number>>): DerivedDefault<number> {
  return {
    shown: Object.entries(table)
      .map(([plan, value]) => `${value} (\`${plan}\`)`)
      .join(', '),
    of: (values) => table[values.workersPlan as WorkersPlan],
  };
}

/** The settings only a Worker reads, beside SHARED_SETTINGS: the HTTP API's, and its drains'. */
export const WORKER_SETTINGS = {
  adminToken: setting({
    variable: 'ADMIN_TOKEN',
    kind: text(`a random string, outside dev ${MIN_SECRET_LENGTH} characters or more`),
    unset: 'required outside dev while the API is on (`skiplock dev` generates one into its state folder)',
    secret: true,
    description:
      'the first admin API key (`Authorization: Bearer <ADMIN_TOKEN>`), which can create the others; shorter is refused at start',
  }),
  statusTokenSecret: setting({
    variable: 'STATUS_TOKEN_SECRET',
    kind: text(`a random string, outside dev ${MIN_SECRET_LENGTH} characters or more`),
    unset: 'required outside dev while the API is on (in dev derived from `ADMIN_TOKEN`)',
    secret: true,
    description: 'signs the browser status tokens of `statusUrl` (HMAC-SHA256); shorter is refused at start',
  }),
  corsOrigins: setting({
    variable: 'CORS_ORIGINS',
    kind: list(() => z.string(), 'origins, comma-separated'),
    unset: 'none',
    description: 'browser origins allowed to call the API and embed the status page',
  }),
  maxBodyBytes: setting({
    variable: 'MAX_BODY_BYTES',
    kind: wholeNumber({ min: 1 }),
    default: 1024 * 1024,
    description: 'the largest request body, in bytes (413 above it)',
  }),
  drainBudgetSeconds: setting({
    variable: 'DRAIN_BUDGET_SECONDS',
    // A Cron Trigger gets 15 minutes of wall time.
    kind: number({ min: 1, max: 900 }),
    // Every minute's trigger gets 30 s of CPU, and a drain's CPU time is below its wall time.
    default: 25,
    description: 'wall time of one cron drain, in seconds',
  }),
  drainConcurrency: setting({
    variable: 'DRAIN_CONCURRENCY',
    kind: wholeNumber({ min: 1, max: 50 }),
    // More than the 6 connections: the drain counts them (ConnectionGate), so jobs that wait on I/O overlap.
    default: 25,
    description:
      "jobs one drain runs at once; their `ctx.fetch` calls and the drain's statements share the invocation's 6 connections, counted, one kept for the drain",
  }),
  drainClaimBatchSize: setting({
    variable: 'DRAIN_CLAIM_BATCH_SIZE',
    kind: wholeNumberOr('auto', { min: 1, max: 1000 }),
    // A database a round trip away: a batch of the slots waits for every claim.
    default: 'auto',
    description: `the jobs one drain claims at a time; more than \`DRAIN_CONCURRENCY\` claims the next batch while the last one runs, so the database's round trip overlaps the work (the held jobs count against their tenant's concurrency); \`auto\` sizes it as the drain runs, from the claims' round trip and the jobs' run time, from \`DRAIN_CONCURRENCY\` (long jobs) up to ${AUTO_BATCH_MAX_SLOTS} times it (jobs shorter than a round trip)`,
  }),
  fastPath: setting({
    variable: 'FAST_PATH',
    kind: onOff(),
    default: true,
    description: "drain right after an enqueue, inside the request's `waitUntil`",
  }),
  fastPathBudgetSeconds: setting({
    variable: 'FAST_PATH_BUDGET_SECONDS',
    // `waitUntil` ends 30 s after the response: leave room to hand back.
    kind: number({ min: 1, max: 25 }),
    default: 20,
    description: 'wall time of one fast-path drain, in seconds',
  }),
  workersPlan: setting({
    variable: 'WORKERS_PLAN',
    kind: oneOf(['free', 'paid']),
    default: 'free',
    description: `the Workers plan, whose subrequest cap (${SUBREQUESTS_OF_PLAN.free} or ${SUBREQUESTS_OF_PLAN.paid} per invocation) a drain keeps under; \`skiplock dev\` sets \`paid\``,
  }),
  subrequestLimit: setting({
    variable: 'SUBREQUEST_LIMIT',
    kind: wholeNumber({ min: 1 }),
    defaultFrom: byPlan(SUBREQUESTS_OF_PLAN),
    description: "the subrequests one invocation may make, when your account's cap differs from its plan's",
  }),
  idleRecheckSeconds: setting({
    variable: 'IDLE_RECHECK_SECONDS',
    kind: wholeNumber({ min: 1, max: 86_400 }),
    // A Neon compute suspends after 5 idle minutes, so an idle queue's database sleeps most of the hour.
    default: 3600,
    description: 'with `SKIPLOCK_CLOCK` bound, the longest an idle queue goes without a drain, in seconds',
  }),
  drainFanout: setting({
    variable: 'DRAIN_FANOUT',
    kind: wholeNumber({ min: 1, max: 64 }),
    defaultFrom: byPlan(FANOUT_OF_PLAN),
    description:
      'with `SKIPLOCK_DRAINER` bound, the most drains at once, the one that starts helpers included; 1 turns fan-out off',
  }),
  logLevel: setting({
    variable: 'LOG_LEVEL',
    kind: oneOf(['warn', 'info']),
    default: 'warn',
    description:
      '`warn`: errors, warnings and one line per cron drain; `info`: also one JSON line per request (with its caller, for an audit trail) and per fast-path or helper drain',
  }),
};

/**
 * Every setting of the Worker, as a `createSkiplock` option: each one left
 * out is read from its variable, so the same deploy can be configured in
 * code, in wrangler's vars and secrets, or both. docs/configuration.md lists
 * them, from SHARED_SETTINGS and WORKER_SETTINGS.
 */
export interface SkiplockSettings
  extends SettingOptions<typeof SHARED_SETTINGS>,
    SettingOptions<typeof WORKER_SETTINGS> {}

/**
 * The Worker's tuning variables, which a local stack passes on from its own
 * environment (`DRAIN_CONCURRENCY=20 npm start`); the database, the secrets
 * and dev mode are its own to set.
 */
export const TUNING_VARIABLES: readonly string[] = [
  ...Object.values(SHARED_SETTINGS),
  ...Object.values(WORKER_SETTINGS),
]
  .filter((each) => each.secret !== true && each.variable !== 'SKIPLOCK_DEV')
  .map((each) => each.variable);

/** Where the queue's Postgres is. */
export type DatabaseSource =
  | { kind: 'hyperdrive'; connectionString: string }
  | { kind: 'neon'; url: string; localProxy: string | undefined };

export interface WorkerDrainSettings {
  budgetSeconds: number;
  concurrency: number;
  /** The jobs one drain claims at a time (DRAIN_CLAIM_BATCH_SIZE). */
  claimBatchSize: number | 'auto';
  fastPath: boolean;
  fastPathBudgetSeconds: number;
  /** The subrequests one drain invocation may make. */
  subrequestLimit: number;
  /** With the queue clock: the longest an idle queue goes without a cron drain (enqueues that bypass the Worker wait at most this). */
  idleRecheckSeconds: number;
  /** With SKIPLOCK_DRAINER: the most drains running at once, the one that starts helpers included. */
  fanout: number;
  /** A summary line for each fast-path and helper drain (LOG_LEVEL=info); cron drains always log theirs. */
  logBackgroundDrains: boolean;
}

export interface ResolvedSettings {
  database: DatabaseSource;
  api: ApiSettings;
  drain: WorkerDrainSettings;
  jobs: JobSettings;
}

/**
 * The settings of one Worker environment: each option, else its variable,
 * else its default. Throws ConfigurationError naming what to fix.
 */
export function resolveSettings(
  options: SkiplockSettings,
  env: SkiplockEnv,
  needs: { api: boolean },
): ResolvedSettings {
  try {
    const shared = readSettings(SHARED_SETTINGS, env, options);
    const worker = readSettings(WORKER_SETTINGS, env, options);
    const verbose = worker.logLevel === 'info';
    return {
      database: databaseSource(shared.databaseUrl, env),
      api: { ...apiSettings(worker, env, shared.devMode, needs.api), logRequests: verbose },
      drain: {
        budgetSeconds: worker.drainBudgetSeconds,
        concurrency: worker.drainConcurrency,
        claimBatchSize: worker.drainClaimBatchSize,
        fastPath: worker.fastPath,
        fastPathBudgetSeconds: worker.fastPathBudgetSeconds,
        subrequestLimit: worker.subrequestLimit,
        logBackgroundDrains: verbose,
        idleRecheckSeconds: worker.idleRecheckSeconds,
        fanout: worker.drainFanout,
      },
      jobs: jobSettings(shared),
    };
  } catch (error) {
    if (error instanceof ConfigurationError) throw error;
    throw new ConfigurationError(error instanceof Error ? error.message : String(error));
  }
}

function databaseSource(url: string | undefined, env: SkiplockEnv): DatabaseSource {
  if (env.HYPERDRIVE !== undefined) return { kind: 'hyperdrive', connectionString: env.HYPERDRIVE.connectionString };
  if (url === undefined) {
    throw new ConfigurationError(
      'no database: set DATABASE_URL (`npx wrangler secret put DATABASE_URL`), bind HYPERDRIVE, or pass databaseUrl',
    );
  }
  const localProxy = env.LOCAL_NEON_PROXY?.trim() || undefined;
  const host = localProxy === undefined ? hostNeonCannotReach(url) : undefined;
  if (host !== undefined) {
    throw new ConfigurationError(
      `DATABASE_URL points at ${host}, which Neon's HTTP driver cannot reach (it speaks HTTP to Neon's endpoints): ` +
        'for a local or other Postgres bind HYPERDRIVE (with localConnectionString under wrangler dev), ' +
        'or give a Neon connection string',
    );
  }
  return { kind: 'neon', url, localProxy };
}

/**
 * The host of a connection string that cannot be a Neon endpoint (an address,
 * localhost, a name without a domain), where Neon's driver would send its
 * HTTP request to a made-up host; undefined for any other (and for text
 * that is no URL, which the driver names itself).
 */
function hostNeonCannotReach(url: string): string | undefined {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const bare = host.replace(/^\[|\]$/g, '');
  const isAddress = /^[\d.]+$/.test(bare) || bare.includes(':');
  return isAddress || !bare.includes('.') ? host : undefined;
}

function apiSettings(
  { adminToken, statusTokenSecret, corsOrigins, maxBodyBytes }: SettingValues<typeof WORKER_SETTINGS>,
  env: SkiplockEnv,
  devMode: boolean,
  apiOn: boolean,
): Omit<ApiSettings, 'logRequests'> {
  if (apiOn && !devMode) {
    const missing = [
      adminToken === undefined && 'ADMIN_TOKEN',
      statusTokenSecret === undefined && 'STATUS_TOKEN_SECRET',
    ].filter((name) => name !== false);
    if (missing.length > 0) {
      const names = missing.join(' and ');
      throw new ConfigurationError(
        `${names} ${missing.length > 1 ? 'are' : 'is'} not set: the HTTP API needs ${missing.length > 1 ? 'them' : 'it'} ` +
          `outside dev (\`npx wrangler secret put ${missing[0]}\`, any long random string)`,
      );
    }
    for (const [name, secret] of [
      ['ADMIN_TOKEN', adminToken],
      ['STATUS_TOKEN_SECRET', statusTokenSecret],
    ] as const) {
      if (secret!.length < MIN_SECRET_LENGTH) {
        throw new ConfigurationError(
          `${name} is ${secret!.length} characters: outside dev it must be at least ${MIN_SECRET_LENGTH} ` +
            `(a random one: \`openssl rand -base64 32\`)`,
        );
      }
    }
  }
  return {
    adminToken,
    statusTokenSecret,
    authRateLimiter: env.AUTH_RATE_LIMITER,
    devMode,
    corsOrigins: corsOrigins ?? [],
    maxBodyBytes,
  };
}
