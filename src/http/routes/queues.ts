import type { Queryable } from '../../db/types';
import { queueStats, type QueueStatsRow, type TenantScope } from '../../engine';
import { tenantScope } from '../auth/principal';
import type { AppDeps } from '../context';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses';
import { summarizeQueues } from '../queue-summaries';
import { QueueListSchema, StatsResponseSchema } from '../schemas/stats';
import { router } from '../validation';

/** A tenant-bound key counts only its own tenant's jobs. */
async function visibleStats(database: Queryable, scope: TenantScope): Promise<QueueStatsRow[]> {
  const rows = await queueStats(database);
  return scope.tenant === undefined ? rows : rows.filter((row) => row.tenant === scope.tenant);
}

export function queueRoutes(deps: AppDeps) {
  const queuesRoute = authorizedRoute(deps, { scopes: ['read'] }, {
    method: 'get',
    path: '/v1/queues',
    summary: 'Job counts per queue and status, and the oldest waiting age',
    responses: { 200: jsonResponse(QueueListSchema, 'Every queue with jobs'), ...problemResponses(401, 403, 503) },
  });

  const statsRoute = authorizedRoute(deps, { scopes: ['read'] }, {
    method: 'get',
    path: '/v1/stats',
    summary: 'Job counts per queue, tenant and status; throughput of the last hour',
    responses: {
      200: jsonResponse(StatsResponseSchema, 'One row per queue, tenant and status'),
      ...problemResponses(401, 403, 503),
    },
  });

  return router()
    .openapi(queuesRoute, async (c) => {
      const rows = await visibleStats(deps.database(c.env), tenantScope(c.var.principal));
      return c.json({ queues: summarizeQueues(rows) }, 200);
    })
    .openapi(statsRoute, async (c) =>
      c.json({ stats: await visibleStats(deps.database(c.env), tenantScope(c.var.principal)) }, 200),
    );
}
