import { createClient, skiplockClient, type JobClient, type SkiplockClient } from '../http/client.js';
import { timeoutSignal } from '../drain/timeout-signal.js';
import { usageFailure } from './cli-failure.js';

/** The flags every operator command takes, besides its own. */
export const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

export const CONNECTION_USAGE = '[--url URL] [--api-key KEY] [--json] (default: SKIPLOCK_URL, SKIPLOCK_API_KEY)';

/** A skiplock deployment's HTTP API, as the operator commands reach it. */
export interface ApiConnection {
  readonly url: string;
  /** Where the URL came from (`SKIPLOCK_URL` or `--url`), so messages say what to fix. */
  readonly urlSource: string;
  /** Where the key came from (`SKIPLOCK_API_KEY` or `--api-key`). */
  readonly keySource: string;
  /** Every route, typed by the app's own schemas. */
  readonly api: SkiplockClient;
  /** Job handles: status, and following a job until it ends. */
  readonly jobs: JobClient;
}

/**
 * A request (a long-poll included: it answers within 30 s) that takes longer
 * than this has met something that is not going to answer.
 */
const REQUEST_TIMEOUT_MS = 60_000;

/** The API named by the flags, else by SKIPLOCK_URL and SKIPLOCK_API_KEY; missing or malformed ones are usage errors. */
export function connect(
  flags: { url?: string; 'api-key'?: string },
  env: NodeJS.ProcessEnv = process.env,
): ApiConnection {
  const urlSource = flags.url === undefined ? 'SKIPLOCK_URL' : '--url';
  const url = flags.url ?? env.SKIPLOCK_URL?.trim();
  if (!url) {
    throw usageFailure(
      'SKIPLOCK_URL is not set: set it to the URL of your skiplock Worker (npm start prints it) or pass --url',
    );
  }
  const parsed = parseUrl(url);
  if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw usageFailure(`${urlSource} must be an http:// or https:// URL, such as http://127.0.0.1:8787, not "${url}"`);
  }
  const keySource = flags['api-key'] === undefined ? 'SKIPLOCK_API_KEY' : '--api-key';
  const apiKey = flags['api-key'] ?? env.SKIPLOCK_API_KEY?.trim();
  if (!apiKey) {
    throw usageFailure(
      'SKIPLOCK_API_KEY is not set: set it to an API key (npm start prints its admin key) or pass --api-key',
    );
  }
  const base = parsed.href.replace(/\/+$/, '');
  const options = { apiKey, fetch: fetchWithTimeout };
  return { url: base, urlSource, keySource, api: skiplockClient(base, options), jobs: createClient(base, options) };
}

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

const fetchWithTimeout: typeof fetch = async (input, init = {}) => {
  const timeout = timeoutSignal(init.signal ?? undefined, REQUEST_TIMEOUT_MS);
  try {
    return await fetch(input, { ...init, signal: timeout.signal });
  } finally {
    timeout.clear();
  }
};
