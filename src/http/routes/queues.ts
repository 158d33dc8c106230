import type { Queryable } from '../../db/types.js';
import { queueHealth, queueStats, type QueueStatsRow, type TenantScope } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import { summarizeQueues } from '../queue-summaries.js';
import { QueueListSchema, StatsResponseSchema } from '../schemas/stats.js';
import { router } from '../validation.js';

/** A tenant-bound key counts only its own tenant's jobs. */
async function visibleStats(database: Queryable, scope: TenantScope): Promise<QueueStatsRow[]> {
  const rows = await queueStats(database);
  return scope.tenant === undefined ? rows : rows.filter((row) => row.tenant === scope.tenant);
}

export function queueRoutes(deps: AppDeps) {
  const queuesRoute = authorizedRoute(deps, { scopes: ['read'] }, {
    method: 'get',
    path: '/v1/queues',
    operationId: 'listQueues',
    tags: ['stats'],
    summary: 'Job counts per queue and status, and the oldest waiting age',
    responses: { 200: jsonResponse(QueueListSchema, 'Every queue with jobs'), ...problemResponses(401, 403, 503) },
  });

  const statsRoute = authorizedRoute(deps, { scopes: ['read'] }, {
    method: 'get',
    path: '/v1/stats',
    operationId: 'getStats',
    tags: ['stats'],
    summary: 'Job counts per queue, tenant and status (finished: last hour), and the queue health',
    responses: {
      200: jsonResponse(StatsResponseSchema, 'One row per queue, tenant and status, and the health view'),
      ...problemResponses(401, 403, 503),
    },
  });

  return router()
    .openapi(queuesRoute, async (c) => {
      const rows = await visibleStats(deps.database(c.env), tenantScope(c.var.principal));
      return c.json({ queues: summarizeQueues(rows) }, 200);
    })
    .openapi(statsRoute, async (c) => {
      const database = deps.database(c.env);
      const scope = tenantScope(c.var.principal);
      const [stats, health] = await Promise.all([visibleStats(database, scope), queueHealth(database, scope)]);
      if (scope.tenant === undefined) return c.json({ stats, health }, 200);
      // The database's own figures (every tenant's rows, other sessions) are not a tenant's to see.
      const { oldestWaitingSeconds, expiredLeasesReaped } = health;
      return c.json({ stats, health: { oldestWaitingSeconds, expiredLeasesReaped } }, 200);
    });
}
