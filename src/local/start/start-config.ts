import { parseDatabaseUrl, type DatabaseTarget } from '../../cli/database-url.js';
import { ConfigurationError, resolveSettings, TUNING_VARIABLES } from '../../worker/settings.js';
import { networkDelayFrom, type NetworkDelay } from '../neon-proxy/network-delay.js';

/** A port that a flag or an environment variable may fix; otherwise `skiplock dev` picks one. */
export interface PortSetting {
  /** What fixed it, for messages: `--port`, `PORT`. */
  readonly variable: string;
  readonly requested: number | undefined;
}

/** The flags of `skiplock dev`, as given; each wins over its environment variable. */
export interface DevFlags {
  cwd?: string;
  stateDir?: string;
  port?: string;
  drainEvery?: string;
  demoJobs?: boolean;
}

/** What `skiplock dev` takes from its flags and the environment, checked before anything starts. */
export interface StartConfig {
  /** The Worker project's folder. */
  projectDir: string;
  /** Where what is kept between runs goes, relative to the project. */
  stateDir: string;
  /** DATABASE_URL; without it an embedded Postgres runs. */
  database: DatabaseTarget | undefined;
  workerPort: PortSetting;
  postgresPort: PortSetting;
  proxyPort: PortSetting;
  /** The round trip the Neon proxy plays between the Worker and Postgres (NEON_PROXY_ROUND_TRIP_MS, NEON_PROXY_JITTER_MS). */
  networkDelay: NetworkDelay;
  /** Fire the drain this often instead of on the cron schedule. */
  drainEverySeconds: number | undefined;
  /** The Worker's first admin key; without it a saved dev key is used. */
  adminToken: string | undefined;
  /** SKIPLOCK_DEV=1: the demo jobs noop, sleep and fail. */
  demoJobs: boolean;
  /** The Worker's tuning variables set in this environment (DRAIN_CONCURRENCY, WORKERS_PLAN...), passed on as they are. */
  workerSettings: Record<string, string>;
}

export const DEFAULT_STATE_DIR = '.skiplock';

export function readStartConfig(env: NodeJS.ProcessEnv, flags: DevFlags): StartConfig {
  const databaseUrl = setting(env, 'DATABASE_URL');
  return {
    projectDir: flags.cwd ?? process.cwd(),
    stateDir: flags.stateDir ?? DEFAULT_STATE_DIR,
    database: databaseUrl === undefined ? undefined : parseDatabaseUrl(databaseUrl, 'DATABASE_URL'),
    workerPort: portSetting(flags.port, '--port') ?? portSetting(setting(env, 'PORT'), 'PORT') ?? unset('--port'),
    postgresPort: portSetting(setting(env, 'POSTGRES_PORT'), 'POSTGRES_PORT') ?? unset('POSTGRES_PORT'),
    proxyPort: portSetting(setting(env, 'PROXY_PORT'), 'PROXY_PORT') ?? unset('PROXY_PORT'),
    networkDelay: networkDelayFrom(env),
    drainEverySeconds:
      drainInterval(flags.drainEvery, '--drain-every') ??
      drainInterval(setting(env, 'DRAIN_EVERY_SECONDS'), 'DRAIN_EVERY_SECONDS'),
    adminToken: setting(env, 'ADMIN_TOKEN'),
    demoJobs: flags.demoJobs ?? false,
    workerSettings: workerSettings(env),
  };
}

/** The Worker's tuning variables set here, refused now, in the Worker's own words, when it could not read them. */
function workerSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  const settings = Object.fromEntries(
    TUNING_VARIABLES.flatMap((name) => {
      const value = setting(env, name);
      return value === undefined ? [] : [[name, value]];
    }),
  );
  try {
    // The database is the local stack's own, reached through its local Neon proxy: a stand-in the check accepts.
    resolveSettings(
      {},
      { ...settings, SKIPLOCK_DEV: '1', DATABASE_URL: 'postgres://checked-later.invalid/db' },
      { api: true },
    );
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    throw new Error(error.message.replace(/^skiplock: /, ''));
  }
  return settings;
}

/** A variable set to the empty string (`PORT= npm start`) counts as unset. */
function setting(env: NodeJS.ProcessEnv, variable: string): string | undefined {
  const value = env[variable]?.trim();
  return value ? value : undefined;
}

function unset(variable: string): PortSetting {
  return { variable, requested: undefined };
}

function portSetting(value: string | undefined, variable: string): PortSetting | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new Error(`${variable} must be a port number from 1 to 65535, not "${value}"`);
  }
  return { variable, requested: port };
}

function drainInterval(value: string | undefined, variable: string): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (!Number.isInteger(seconds) || seconds < 1) {
    throw new Error(`${variable} must be a whole number of seconds, 1 or more, not "${value}"`);
  }
  return seconds;
}
