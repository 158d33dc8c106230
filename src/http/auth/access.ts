import type { Context, MiddlewareHandler } from 'hono';
import type { ApiKeyScope } from '../../engine/api-keys.js';
import type { AppDeps, AppEnv } from '../context.js';
import { forbidden, ProblemError, tooManyRequests, unauthorized } from '../problem.js';
import { keyHolderFor } from './key-holder.js';
import { hasScope, type KeyHolder, type Principal } from './principal.js';
import { statusTokenSecret, verifyStatusToken } from './status-token.js';

export interface AccessRule {
  /** A key needs one of these scopes (or `admin`). */
  scopes: readonly ApiKeyScope[];
  /** The route reads the job of its `{id}` parameter, which that job's status token (`?token=`) opens too. */
  statusToken?: boolean;
}

const BEARER = /^Bearer +([^\s]+) *$/i;

/**
 * Route middleware: resolves the caller (401 when there is none) and checks
 * the rule (403 when a key lacks the scope). What a tenant-bound key may see
 * is the route's business, through `tenantScope(principal)`.
 */
export function access(deps: AppDeps, rule: AccessRule): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = await limitingFailures(c, deps, () => authenticate(c, deps, rule));
    if (principal.kind === 'api-key' && !hasScope(principal, rule.scopes)) {
      throw forbidden(`this key lacks the ${[...rule.scopes, 'admin'].join(' or ')} scope`);
    }
    c.set('principal', principal);
    await next();
  };
}

/**
 * The key holder of a request whose key is optional (`/healthz`): undefined
 * without an Authorization header, 401 for a key that is not valid.
 */
export async function optionalKeyHolder(c: Context<AppEnv>, deps: AppDeps): Promise<KeyHolder | undefined> {
  const authorization = c.req.header('authorization');
  if (authorization === undefined) return undefined;
  return limitingFailures(c, deps, () => keyHolderOf(c, deps, authorization));
}

/**
 * Authenticates, counting a failure against the client and turning away a
 * client past its limit before anything is checked.
 */
async function limitingFailures<T>(
  c: Context<AppEnv>,
  deps: AppDeps,
  authenticateCaller: () => Promise<T>,
): Promise<T> {
  const wait = failedAuthenticationWait(c);
  if (wait !== undefined) {
    const detail = `this client made too many failed authentications; retry in ${wait} s`;
    throw tooManyRequests('too-many-failed-authentications', 'Too many failed authentications', detail, wait);
  }
  try {
    return await authenticateCaller();
  } catch (error) {
    if (error instanceof ProblemError && error.status === 401) await countFailedAuthentication(c, deps);
    throw error;
  }
}

/**
 * The client a failed authentication counts against: its address
 * (CF-Connecting-IP, which Cloudflare sets on every request). Without one (a
 * host outside Cloudflare) nothing is counted: that host's own front must
 * limit, or every client would share one count and one could lock out all.
 */
function clientOf(c: Context<AppEnv>): string | undefined {
  return c.req.header('cf-connecting-ip');
}

/** Seconds until this request's client may authenticate again; undefined when it may now. */
export function failedAuthenticationWait(c: Context<AppEnv>): number | undefined {
  const client = clientOf(c);
  return client === undefined ? undefined : c.var.failedAuthentications.retryAfterSeconds(client);
}

/** Counts a failed authentication (an unknown key, a bad status token) against this request's client. */
export async function countFailedAuthentication(c: Context<AppEnv>, deps: AppDeps): Promise<void> {
  const client = clientOf(c);
  if (client !== undefined)
    await c.var.failedAuthentications.recordFailure(client, deps.settings(c.env).authRateLimiter);
}

async function authenticate(c: Context<AppEnv>, deps: AppDeps, rule: AccessRule): Promise<Principal> {
  const authorization = c.req.header('authorization');
  if (authorization !== undefined) return keyHolderOf(c, deps, authorization);
  const token = c.req.query('token');
  if (rule.statusToken && token !== undefined) {
    const jobId = c.req.param('id');
    const secret = await statusTokenSecret(deps.settings(c.env));
    if (jobId !== undefined && secret !== undefined && (await verifyStatusToken(secret, jobId, token))) {
      return { kind: 'status-token', jobId };
    }
    throw unauthorized('the status token is not valid for this job, or it has expired');
  }
  throw unauthorized('this route needs an API key: Authorization: Bearer <key>');
}

async function keyHolderOf(c: Context<AppEnv>, deps: AppDeps, authorization: string): Promise<KeyHolder> {
  const bearer = BEARER.exec(authorization)?.[1];
  if (bearer === undefined) throw unauthorized('send the key as Authorization: Bearer <key>');
  const holder = await keyHolderFor(bearer, deps.settings(c.env).adminToken, () => deps.database(c.env));
  if (holder === undefined) throw unauthorized('the API key is unknown or revoked');
  return holder;
}
