import { throughputLastHour } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import { ThroughputSchema } from '../schemas/throughput.js';
import { router } from '../validation.js';

export function throughputRoutes(deps: AppDeps) {
  const throughputRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/stats/throughput',
      operationId: 'getThroughput',
      tags: ['stats'],
      summary: 'Jobs finished per queue and minute over the last hour',
      description: "A tenant-bound key counts only its own tenant's jobs.",
      responses: {
        200: jsonResponse(ThroughputSchema, 'The minutes with finished jobs'),
        ...problemResponses(401, 403, 503),
      },
    },
  );

  return router().openapi(throughputRoute, async (c) =>
    c.json({ throughput: await throughputLastHour(deps.database(c.env), tenantScope(c.var.principal)) }, 200),
  );
}
