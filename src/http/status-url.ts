import type { Context } from 'hono';
import { STATUS_TOKEN_TTL_SECONDS, statusTokenSecret, statusTokenSigner } from './auth/status-token.js';
import type { ApiSettings, AppEnv } from './context.js';

/** Makes the `statusUrl` of enqueued jobs; null for each when the Worker has no status-token secret. */
export type StatusUrlMaker = (jobId: string) => Promise<string | null>;

/**
 * The path a host app mounted this one under (`app.route('/queue', skiplock.app)`),
 * read off the matched route; empty at the root.
 */
export function mountPath(c: Context<AppEnv>): string {
  const route = c.req.routePath;
  const at = route.indexOf('/v1/');
  return at > 0 ? route.slice(0, at) : '';
}

/**
 * Status URLs point at this Worker's own `GET /v1/jobs/{id}`, absolute, from
 * the origin the request came in on, with a token that opens that job for a day.
 */
export async function statusUrlMaker(c: Context<AppEnv>, settings: ApiSettings): Promise<StatusUrlMaker> {
  const secret = await statusTokenSecret(settings);
  if (secret === undefined) return async () => null;
  const sign = await statusTokenSigner(secret);
  const expiresAtSeconds = Math.floor(Date.now() / 1000) + STATUS_TOKEN_TTL_SECONDS;
  // One URL parsed per request, not per job: a job id (a uuid) and a token (base64url and dots) need no escaping.
  const jobs = new URL(`${mountPath(c)}/v1/jobs/`, c.req.url).href;
  return async (jobId) => `${jobs}${jobId}?token=${await sign(jobId, expiresAtSeconds)}`;
}
