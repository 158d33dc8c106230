import { listKeys, unblockKey } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import {
  ConcurrencyKeyPageSchema,
  ConcurrencyKeyParamsSchema,
  ListConcurrencyKeysQuerySchema,
  UnblockKeyQuerySchema,
  UnblockKeyResponseSchema,
} from '../schemas/concurrency-key.js';
import { router } from '../validation.js';

export function concurrencyKeyRoutes(deps: AppDeps) {
  const listRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/concurrency-keys',
      operationId: 'listConcurrencyKeys',
      tags: ['concurrency-keys'],
      summary: 'The concurrency and ordering keys in use: their slots, held jobs, and the keys a failed head holds',
      request: { query: ListConcurrencyKeysQuerySchema },
      responses: {
        200: jsonResponse(ConcurrencyKeyPageSchema, 'One page of keys, in (tenant, key) order'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  const unblockRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'post',
      path: '/v1/concurrency-keys/{key}/unblock',
      operationId: 'unblockConcurrencyKey',
      tags: ['concurrency-keys'],
      summary: 'Let an ordering key held by its failed head go on: its next job takes the turn',
      description:
        'Retrying the failed head instead (POST /v1/jobs/{id}/retry) runs it first and keeps the order. ' +
        'Unblocking a key that is not held changes nothing.',
      request: { params: ConcurrencyKeyParamsSchema, query: UnblockKeyQuerySchema },
      responses: {
        200: jsonResponse(UnblockKeyResponseSchema, 'Whether the key was held'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  return router()
    .openapi(listRoute, async (c) => {
      const query = c.req.valid('query');
      const bound = tenantScope(c.var.principal).tenant;
      // A tenant-bound key asking for another tenant sees none of its keys.
      if (bound !== undefined && query.tenant !== undefined && query.tenant !== bound) {
        return c.json({ keys: [], nextCursor: null }, 200);
      }
      const page = await listKeys(deps.database(c.env), {
        tenant: bound ?? query.tenant,
        blocked: query.blocked === 'true',
        ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
        ...(query.limit === undefined ? {} : { limit: query.limit }),
      });
      return c.json(page, 200);
    })
    .openapi(unblockRoute, async (c) => {
      const { key } = c.req.valid('param');
      const { tenant } = c.req.valid('query');
      const bound = tenantScope(c.var.principal).tenant;
      if (bound !== undefined && tenant !== undefined && tenant !== bound) return c.json({ unblocked: false }, 200);
      const unblocked = await unblockKey(deps.database(c.env), key, { tenant: bound ?? tenant ?? 'default' });
      // The key's next job is waiting now: a drain takes it, as after an enqueue.
      if (unblocked && deps.onEnqueued) deps.onEnqueued(c.executionCtx, c.env);
      return c.json({ unblocked }, 200);
    });
}
