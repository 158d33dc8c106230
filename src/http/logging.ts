import type { MiddlewareHandler } from 'hono';
import type { Principal } from './auth/principal.js';
import type { AppEnv } from './context.js';

/** One JSON object per line: what Workers Logs and `wrangler tail` index by field. */
function writeLine(level: 'info' | 'error', fields: Record<string, unknown>): void {
  const line = JSON.stringify({ level, ...fields });
  if (level === 'error') console.error(line);
  else console.log(line);
}

/** Who made a request, for the audit trail: a key's id, the ADMIN_TOKEN, a status token, or nobody known. */
function callerOf(principal: Principal | undefined): string | null {
  if (principal === undefined) return null;
  if (principal.kind === 'status-token') return 'status-token';
  return principal.keyId ?? 'admin-token';
}

/**
 * One line per request once its response is ready, when the host asks for
 * them (a line costs a Worker CPU time per request). The path is logged
 * without its query string, which may carry a status token.
 */
export function requestLog(logRequests: (env: AppEnv['Bindings']) => boolean): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!logRequests(c.env)) return next();
    const started = Date.now();
    await next();
    writeLine('info', {
      event: 'request',
      requestId: c.var.requestId,
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      ms: Date.now() - started,
      caller: callerOf(c.get('principal')),
    });
  };
}

/** An error worth a look, found again by its request id. */
export function logError(requestId: string, event: string, error: unknown): void {
  writeLine('error', {
    event,
    requestId,
    error: error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : String(error),
  });
}
