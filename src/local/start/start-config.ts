import { parseDatabaseUrl, type DatabaseTarget } from '../../cli/database-url.js';
import { ConfigurationError, resolveSettings, TUNING_VARIABLES } from '../../worker/settings.js';

/** A port that an environment variable may fix; otherwise `npm start` picks one. */
export interface PortSetting {
  readonly variable: string;
  readonly requested: number | undefined;
}

/** What `npm start` takes from the environment, checked before anything starts. */
export interface StartConfig {
  /** DATABASE_URL; without it `npm start` runs an embedded Postgres. */
  database: DatabaseTarget | undefined;
  workerPort: PortSetting;
  postgresPort: PortSetting;
  proxyPort: PortSetting;
  /** Fire the drain this often instead of on the cron schedule. */
  drainEverySeconds: number | undefined;
  /** The Worker's first admin key; without it a saved dev key is used. */
  adminToken: string | undefined;
  /** The Worker's tuning variables set in this environment (DRAIN_CONCURRENCY, WORKERS_PLAN...), passed on as they are. */
  workerSettings: Record<string, string>;
}

export function readStartConfig(env: NodeJS.ProcessEnv): StartConfig {
  const databaseUrl = setting(env, 'DATABASE_URL');
  return {
    database: databaseUrl === undefined ? undefined : parseDatabaseUrl(databaseUrl, 'DATABASE_URL'),
    workerPort: portSetting(env, 'PORT'),
    postgresPort: portSetting(env, 'POSTGRES_PORT'),
    proxyPort: portSetting(env, 'PROXY_PORT'),
    drainEverySeconds: drainInterval(env),
    adminToken: setting(env, 'ADMIN_TOKEN'),
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
    // The database is npm start's own, reached through its local Neon proxy: a stand-in the check accepts.
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

function portSetting(env: NodeJS.ProcessEnv, variable: string): PortSetting {
  const value = setting(env, variable);
  if (value === undefined) return { variable, requested: undefined };
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new Error(`${variable} must be a port number from 1 to 65535, not "${value}"`);
  }
  return { variable, requested: port };
}

function drainInterval(env: NodeJS.ProcessEnv): number | undefined {
  const value = setting(env, 'DRAIN_EVERY_SECONDS');
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (!Number.isInteger(seconds) || seconds < 1) {
    throw new Error(`DRAIN_EVERY_SECONDS must be a whole number of seconds, 1 or more, not "${value}"`);
  }
  return seconds;
}
