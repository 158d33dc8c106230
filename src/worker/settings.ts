import { DEFAULT_DRAIN_BUDGET_SECONDS } from '../drain/drain-once.js';
import { readJobSettings, readNumber, readSwitch, type JobSettings } from '../drain/settings.js';
import type { ApiSettings } from '../http/context.js';
import { LIMITS } from '../http/limits.js';
import type { SkiplockEnv } from './env.js';

/**
 * Every setting of the Worker, as a `createSkiplock` option. Each one left
 * out is read from its variable (named beside it), so the same deploy can be
 * configured in code, in wrangler's vars and secrets, or both.
 */
export interface SkiplockSettings {
  /** DATABASE_URL. A HYPERDRIVE binding wins over it. */
  databaseUrl?: string;
  /** ADMIN_TOKEN: the first admin API key. Required outside dev while the API is on, at least 32 characters. */
  adminToken?: string;
  /** STATUS_TOKEN_SECRET: signs status URLs. Required outside dev while the API is on, at least 32 characters. */
  statusTokenSecret?: string;
  /** CORS_ORIGINS. */
  corsOrigins?: readonly string[];
  /** MAX_BODY_BYTES. */
  maxBodyBytes?: number;
  /** SKIPLOCK_DEV=1: demo jobs, a status-token secret derived from the admin token, no required secrets. */
  devMode?: boolean;
  /** DRAIN_BUDGET_SECONDS: wall time of one cron drain (at most 900). */
  drainBudgetSeconds?: number;
  /** DRAIN_CONCURRENCY: jobs one drain runs at once (1 to 50; default 25, their I/O sharing 6 connections). */
  drainConcurrency?: number;
  /** FAST_PATH: drain right after an enqueue, inside the request's waitUntil. */
  fastPath?: boolean;
  /** FAST_PATH_BUDGET_SECONDS: wall time of one fast-path drain (at most 25). */
  fastPathBudgetSeconds?: number;
  /** WORKERS_PLAN: `free` (the default) or `paid`; sets the subrequest cap a drain keeps under. */
  workersPlan?: 'free' | 'paid';
  /** SUBREQUEST_LIMIT: the subrequests one invocation may make; wins over the plan's. */
  subrequestLimit?: number;
  /** IDLE_RECHECK_SECONDS: with the queue clock bound, how long an idle queue goes without a drain at most. */
  idleRecheckSeconds?: number;
  /** DRAIN_FANOUT: with SKIPLOCK_DRAINER bound, the most drains at once (the one that fans out included); 1 turns fan-out off. */
  drainFanout?: number;
  /** LOG_LEVEL: `warn` (the default: errors and warnings) or `info` (also a line per request and per fast-path or helper drain). */
  logLevel?: 'warn' | 'info';
  /** RETENTION_SECONDS: how long finished jobs are kept. */
  retentionSeconds?: number;
  /** STATS_RETENTION_DAYS: how many days the daily attempt statistics are kept. */
  statsRetentionDays?: number;
  /** HTTP_ALLOWED_HOSTS: hosts the built-in `http` job may call. */
  httpAllowedHosts?: readonly string[];
  /** HTTP_SIGNING_SECRET: signs `http` job deliveries. */
  httpSigningSecret?: string;
}

const VARIABLE_OF = {
  databaseUrl: 'DATABASE_URL',
  adminToken: 'ADMIN_TOKEN',
  statusTokenSecret: 'STATUS_TOKEN_SECRET',
  corsOrigins: 'CORS_ORIGINS',
  maxBodyBytes: 'MAX_BODY_BYTES',
  devMode: 'SKIPLOCK_DEV',
  drainBudgetSeconds: 'DRAIN_BUDGET_SECONDS',
  drainConcurrency: 'DRAIN_CONCURRENCY',
  fastPath: 'FAST_PATH',
  fastPathBudgetSeconds: 'FAST_PATH_BUDGET_SECONDS',
  workersPlan: 'WORKERS_PLAN',
  subrequestLimit: 'SUBREQUEST_LIMIT',
  idleRecheckSeconds: 'IDLE_RECHECK_SECONDS',
  drainFanout: 'DRAIN_FANOUT',
  logLevel: 'LOG_LEVEL',
  retentionSeconds: 'RETENTION_SECONDS',
  statsRetentionDays: 'STATS_RETENTION_DAYS',
  httpAllowedHosts: 'HTTP_ALLOWED_HOSTS',
  httpSigningSecret: 'HTTP_SIGNING_SECRET',
} as const satisfies Record<keyof SkiplockSettings, keyof SkiplockEnv>;

/**
 * The Worker's tuning variables, which a local stack passes on from its own
 * environment (`DRAIN_CONCURRENCY=20 npm start`); the database, the secrets
 * and dev mode are its own to set.
 */
export const TUNING_VARIABLES: readonly string[] = Object.values(VARIABLE_OF).filter(
  (name) => !['DATABASE_URL', 'ADMIN_TOKEN', 'STATUS_TOKEN_SECRET', 'SKIPLOCK_DEV', 'HTTP_SIGNING_SECRET'].includes(name),
);

type Variables = { -readonly [Name in (typeof VARIABLE_OF)[keyof SkiplockSettings]]?: string | undefined };

/**
 * The shortest ADMIN_TOKEN and STATUS_TOKEN_SECRET accepted outside dev: 32
 * characters of a random string hold more than 128 bits, which no one
 * guesses, whatever limits requests.
 */
export const MIN_SECRET_LENGTH = 32;

/** Cron drains: at most the 15 minutes of wall time a Cron Trigger gets. */
const MAX_DRAIN_BUDGET_SECONDS = 900;
/** Fast-path drains live in `waitUntil`, which ends 30 s after the response: leave room to hand back. */
const MAX_FAST_PATH_BUDGET_SECONDS = 25;
const DEFAULT_FAST_PATH_BUDGET_SECONDS = 20;
/**
 * Jobs a Worker drain runs at once. More than its 6 connections: the drain
 * counts them (ConnectionGate), so jobs that wait on I/O overlap while its
 * own statements always have one.
 */
const WORKER_DRAIN_CONCURRENCY = 25;
/** Subrequests per invocation by plan (Cloudflare's limits; a Paid account can raise its own: set SUBREQUEST_LIMIT). */
const SUBREQUESTS_OF_PLAN = { free: 50, paid: 1000 } as const;
/**
 * Drains at once by plan: a Free account's invocations get 10 ms of CPU and
 * its Durable Objects 100,000 requests a day, so it doubles; Paid goes to 8,
 * each with its own budget, 6 connections and subrequests.
 */
const FANOUT_OF_PLAN = { free: 2, paid: 8 } as const;
const MAX_FANOUT = 64;
/** An idle queue's database wakes once an hour: a Neon compute suspends after 5 idle minutes, so it sleeps most of the hour. */
const DEFAULT_IDLE_RECHECK_SECONDS = 3600;

/** Where the queue's Postgres is. */
export type DatabaseSource =
  | { kind: 'hyperdrive'; connectionString: string }
  | { kind: 'neon'; url: string; localProxy: string | undefined };

export interface WorkerDrainSettings {
  budgetSeconds: number;
  concurrency: number;
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

/** A setting that is missing or unreadable: its message is the one line the Worker's log shows. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
  constructor(problem: string) {
    super(`skiplock: ${problem}`);
  }
}

/**
 * The settings of one Worker environment: each option, else its variable,
 * else its default. Throws ConfigurationError naming what to fix.
 */
export function resolveSettings(options: SkiplockSettings, env: SkiplockEnv, needs: { api: boolean }): ResolvedSettings {
  const vars = variables(options, env);
  try {
    const jobs = readJobSettings(vars);
    const verbose = logLevel(vars) === 'info';
    return {
      database: databaseSource(vars, env),
      api: { ...apiSettings(vars, env, jobs.devMode, needs.api), logRequests: verbose },
      drain: {
        budgetSeconds: readNumber(vars, 'DRAIN_BUDGET_SECONDS', DEFAULT_DRAIN_BUDGET_SECONDS, {
          min: 1,
          max: MAX_DRAIN_BUDGET_SECONDS,
        }),
        concurrency: readNumber(vars, 'DRAIN_CONCURRENCY', WORKER_DRAIN_CONCURRENCY, { min: 1, max: 50, integer: true }),
        fastPath: readSwitch(vars, 'FAST_PATH', true),
        fastPathBudgetSeconds: readNumber(vars, 'FAST_PATH_BUDGET_SECONDS', DEFAULT_FAST_PATH_BUDGET_SECONDS, {
          min: 1,
          max: MAX_FAST_PATH_BUDGET_SECONDS,
        }),
        subrequestLimit: readNumber(vars, 'SUBREQUEST_LIMIT', SUBREQUESTS_OF_PLAN[workersPlan(vars)], { min: 1, integer: true }),
        logBackgroundDrains: verbose,
        idleRecheckSeconds: readNumber(vars, 'IDLE_RECHECK_SECONDS', DEFAULT_IDLE_RECHECK_SECONDS, { min: 1, max: 86_400, integer: true }),
        fanout: readNumber(vars, 'DRAIN_FANOUT', FANOUT_OF_PLAN[workersPlan(vars)], { min: 1, max: MAX_FANOUT, integer: true }),
      },
      jobs,
    };
  } catch (error) {
    if (error instanceof ConfigurationError) throw error;
    throw new ConfigurationError(error instanceof Error ? error.message : String(error));
  }
}

/** The variables, with each option given in code written over its variable in the variables' own text form. */
function variables(options: SkiplockSettings, env: SkiplockEnv): Variables {
  const vars: Variables = {};
  for (const [option, name] of Object.entries(VARIABLE_OF) as [keyof SkiplockSettings, keyof Variables][]) {
    const value = options[option];
    vars[name] =
      value === undefined
        ? (env[name] as string | undefined)
        : Array.isArray(value)
          ? value.join(',')
          : typeof value === 'boolean'
            ? (name === 'SKIPLOCK_DEV' ? (value ? '1' : '0') : value ? 'on' : 'off')
            : String(value);
  }
  return vars;
}

function logLevel(vars: Variables): 'warn' | 'info' {
  const level = vars.LOG_LEVEL?.trim().toLowerCase() || 'warn';
  if (level !== 'warn' && level !== 'info') throw new ConfigurationError(`LOG_LEVEL must be warn or info, not "${vars.LOG_LEVEL}"`);
  return level;
}

function workersPlan(vars: Variables): keyof typeof SUBREQUESTS_OF_PLAN {
  const plan = vars.WORKERS_PLAN?.trim().toLowerCase() || 'free';
  if (plan !== 'free' && plan !== 'paid') throw new ConfigurationError(`WORKERS_PLAN must be free or paid, not "${vars.WORKERS_PLAN}"`);
  return plan;
}

function databaseSource(vars: Variables, env: SkiplockEnv): DatabaseSource {
  if (env.HYPERDRIVE !== undefined) return { kind: 'hyperdrive', connectionString: env.HYPERDRIVE.connectionString };
  const url = vars.DATABASE_URL?.trim();
  if (!url) {
    throw new ConfigurationError(
      'no database: set DATABASE_URL (`npx wrangler secret put DATABASE_URL`), bind HYPERDRIVE, or pass databaseUrl',
    );
  }
  return { kind: 'neon', url, localProxy: env.LOCAL_NEON_PROXY?.trim() || undefined };
}

function apiSettings(vars: Variables, env: SkiplockEnv, devMode: boolean, apiOn: boolean): Omit<ApiSettings, 'logRequests'> {
  const adminToken = vars.ADMIN_TOKEN?.trim() || undefined;
  const statusTokenSecret = vars.STATUS_TOKEN_SECRET?.trim() || undefined;
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
    for (const [name, secret] of [['ADMIN_TOKEN', adminToken], ['STATUS_TOKEN_SECRET', statusTokenSecret]] as const) {
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
    corsOrigins: (vars.CORS_ORIGINS ?? '').split(',').map((origin) => origin.trim()).filter((origin) => origin !== ''),
    maxBodyBytes: readNumber(vars, 'MAX_BODY_BYTES', LIMITS.defaultMaxBodyBytes, { min: 1, integer: true }),
  };
}
