import { z } from '@hono/zod-openapi';
import { queueMetrics } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, problemResponses } from '../openapi-responses.js';
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from '../prometheus-text.js';
import { router } from '../validation.js';

export function metricsRoutes(deps: AppDeps) {
  const metricsRoute = authorizedRoute(
    deps,
    { scopes: ['operator'] },
    {
      method: 'get',
      path: '/metrics',
      operationId: 'getMetrics',
      tags: ['stats'],
      summary:
        'Prometheus metrics per queue and tenant: jobs by state, the oldest wait, attempts started and how they ended, their times',
      description:
        'The Prometheus text format (0.0.4), read in one statement whose cost does not grow with the jobs waiting. ' +
        "A tenant-bound key sees its own tenant's series. Series and their meaning: docs/operations.md#prometheus-metrics.",
      responses: {
        200: {
          description: 'The exposition',
          content: { 'text/plain; version=0.0.4': { schema: z.string() } },
        },
        ...problemResponses(401, 403, 503),
      },
    },
  );

  return router().openapi(metricsRoute, async (c) => {
    const metrics = await queueMetrics(deps.database(c.env), tenantScope(c.var.principal));
    return c.text(prometheusText(metrics), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE });
  });
}
