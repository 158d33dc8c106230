import type { Context, MiddlewareHandler } from 'hono';
import { type ApiKey, type ApiKeyScope, findActiveApiKey } from '../../engine/api-keys.js';
import type { AppDeps, AppEnv } from '../context.js';
import { forbidden, ProblemError, tooManyRequests, unauthorized } from '../problem.js';
import { looksLikeApiKey } from './api-key-secret.js';
import { sha256Hex } from './crypto.js';
import { adminTokenHolder, apiKeyHolder, keyHolderFor } from './key-holder.js';
import type { PresentedApiKey } from './presented-api-key.js';
import { hasScope, type KeyHolder, type Principal } from './principal.js';
import { statusTokenSecret, verifyStatusToken } from './status-token.js';

export interface AccessRule {
  /** A key needs one of these scopes (or `admin`). */
  scopes: readonly ApiKeyScope[];
  /** The route reads the job of its `{id}` parameter, which that job's status token (`?token=`) opens too. */
  statusToken?: boolean;
  /**
   * The route checks an API key in its own statement, saving the round trip
   * of a lookup: an API key reaches it unchecked, as `c.var.presentedKey`,
   * which the route must settle (the ADMIN_TOKEN and every refusal that needs
   * no database are settled here, as on every route).
   */
  keyCheckedByStatement?: boolean;
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
    if (principal.kind === 'presented-api-key') {
      c.set('presentedKey', principal);
    } else {
      if (principal.kind === 'api-key') checkScope(principal, rule);
      c.set('principal', principal);
    }
    await next();
  };
}

/** 403 for a key that lacks the rule's scopes. */
function checkScope(holder: KeyHolder, rule: AccessRule): void {
  if (!hasScope(holder, rule.scopes)) {
    throw forbidden(`this key lacks the ${[...rule.scopes, 'admin'].join(' or ')} scope`);
  }
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

async function authenticate(c: Context<AppEnv>, deps: AppDeps, rule: AccessRule): Promise<Principal | PresentedApiKey> {
  const authorization = c.req.header('authorization');
  if (authorization !== undefined && rule.keyCheckedByStatement) return presentedKeyOf(c, deps, rule, authorization);
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
  const holder = await keyHolderFor(bearerOf(authorization), deps.settings(c.env).adminToken, () =>
    deps.database(c.env),
  );
  return holder ?? refuseUnknownKey();
}

function bearerOf(authorization: string): string {
  const bearer = BEARER.exec(authorization)?.[1];
  if (bearer === undefined) throw unauthorized('send the key as Authorization: Bearer <key>');
  return bearer;
}

function refuseUnknownKey(): never {
  throw unauthorized('the API key is unknown or revoked');
}

/**
 * As keyHolderOf, for a route that checks an API key in its own statement: the
 * ADMIN_TOKEN's holder, or an API key left for that statement to find.
 */
async function presentedKeyOf(
  c: Context<AppEnv>,
  deps: AppDeps,
  rule: AccessRule,
  authorization: string,
): Promise<KeyHolder | PresentedApiKey> {
  const bearer = bearerOf(authorization);
  const admin = await adminTokenHolder(bearer, deps.settings(c.env).adminToken);
  if (admin !== undefined) return admin;
  if (!looksLikeApiKey(bearer)) refuseUnknownKey();
  const secretSha256 = await sha256Hex(bearer);
  let settled = false;
  const settle = async (key: ApiKey | undefined): Promise<KeyHolder> => {
    // Once only, whatever it answers: an error after a refusal must not settle the key again.
    settled = true;
    if (key === undefined) {
      // What limitingFailures does for a 401 of the middleware.
      await countFailedAuthentication(c, deps);
      refuseUnknownKey();
    }
    const holder = apiKeyHolder(key);
    checkScope(holder, rule);
    c.set('principal', holder);
    return holder;
  };
  return {
    kind: 'presented-api-key',
    secretSha256,
    scopes: [...rule.scopes, 'admin'],
    settle,
    lookUp: async () => settle(await findActiveApiKey(deps.database(c.env), secretSha256)),
    get settled() {
      return settled;
    },
  };
}
