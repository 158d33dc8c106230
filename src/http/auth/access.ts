import type { Context, MiddlewareHandler } from 'hono';
import type { ApiKeyScope } from '../../engine/api-keys.js';
import type { AppDeps, AppEnv } from '../context.js';
import { forbidden, unauthorized } from '../problem.js';
import { keyHolderFor } from './key-holder.js';
import { hasScope, type Principal } from './principal.js';
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
    const principal = await authenticate(c, deps, rule);
    if (principal.kind === 'api-key' && !hasScope(principal, rule.scopes)) {
      throw forbidden(`this key lacks the ${[...rule.scopes, 'admin'].join(' or ')} scope`);
    }
    c.set('principal', principal);
    await next();
  };
}

async function authenticate(c: Context<AppEnv>, deps: AppDeps, rule: AccessRule): Promise<Principal> {
  const authorization = c.req.header('authorization');
  if (authorization !== undefined) {
    const bearer = BEARER.exec(authorization)?.[1];
    if (bearer === undefined) throw unauthorized('send the key as Authorization: Bearer <key>');
    const holder = await keyHolderFor(bearer, deps.settings(c.env).adminToken, () => deps.database(c.env));
    if (holder === undefined) throw unauthorized('the API key is unknown or revoked');
    return holder;
  }
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
