import type { BuiltInJobSettings } from './handlers/built-in.js';
import { readAllowedHosts } from './handlers/http-destination.js';
import { DEFAULT_RETENTION_SECONDS, DEFAULT_STATS_RETENTION_DAYS } from './housekeeping.js';

/**
 * The variables the drain reads, whether from a Worker's env or a Node
 * process's environment. All strings, as wrangler vars and secrets are.
 */
export interface DrainVariables {
  readonly SKIPLOCK_DEV?: string | undefined;
  readonly RETENTION_SECONDS?: string | undefined;
  readonly STATS_RETENTION_DAYS?: string | undefined;
  readonly HTTP_ALLOWED_HOSTS?: string | undefined;
  readonly HTTP_SIGNING_SECRET?: string | undefined;
}

export interface JobSettings extends BuiltInJobSettings {
  retentionSeconds: number;
  statsRetentionDays: number;
}

export function readJobSettings(vars: DrainVariables): JobSettings {
  const signingSecret = vars.HTTP_SIGNING_SECRET?.trim();
  return {
    devMode: vars.SKIPLOCK_DEV?.trim() === '1',
    retentionSeconds: readNumber(vars, 'RETENTION_SECONDS', DEFAULT_RETENTION_SECONDS, { min: 0 }),
    statsRetentionDays: readNumber(vars, 'STATS_RETENTION_DAYS', DEFAULT_STATS_RETENTION_DAYS, { min: 1, integer: true }),
    http: {
      allowedHosts: readAllowedHosts(vars.HTTP_ALLOWED_HOSTS),
      ...(signingSecret ? { signingSecret } : {}),
    },
  };
}

/** A numeric setting; unset or empty means the default, anything unreadable is refused by name. */
export function readNumber<Name extends string>(
  vars: { readonly [name in Name]?: string | undefined },
  name: Name,
  fallback: number,
  range: { min: number; max?: number; integer?: boolean },
): number {
  const text = vars[name]?.trim();
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  const max = range.max ?? Number.POSITIVE_INFINITY;
  if (!Number.isFinite(value) || value < range.min || value > max || (range.integer && !Number.isInteger(value))) {
    const kind = range.integer ? 'a whole number' : 'a number';
    const bounds = Number.isFinite(max) ? `from ${range.min} to ${max}` : `from ${range.min}`;
    throw new Error(`${name} must be ${kind} ${bounds}, not "${text}"`);
  }
  return value;
}

/** An on/off setting: `on`/`off` (or 1/0, true/false); unset or empty means the default. */
export function readSwitch<Name extends string>(
  vars: { readonly [name in Name]?: string | undefined },
  name: Name,
  fallback: boolean,
): boolean {
  const text = vars[name]?.trim().toLowerCase();
  if (text === undefined || text === '') return fallback;
  if (['on', '1', 'true'].includes(text)) return true;
  if (['off', '0', 'false'].includes(text)) return false;
  throw new Error(`${name} must be on or off, not "${text}"`);
}
