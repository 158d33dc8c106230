import { createRoute } from '@hono/zod-openapi';
import { attemptTimings } from '../../engine/index.js';
import { access } from '../auth/access.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { BEARER_SECURITY, jsonResponse, problemResponses } from '../openapi-responses.js';
import { AttemptTimingsSchema, TimingWindowQuerySchema } from '../schemas/attempt-timings.js';
import { router } from '../validation.js';

export function attemptTimingsRoutes(deps: AppDeps) {
  const timingsRoute = createRoute({
    method: 'get',
    path: '/v1/stats/timings',
    operationId: 'getAttemptTimings',
    tags: ['stats'],
    summary: 'Wait and run times of attempts, per queue and tenant, over the last hour, day or week',
    description:
      "p50 and p95 of how long attempts waited for their handler to start and how long they ran. A tenant-bound key sees its own tenant's.",
    security: BEARER_SECURITY,
    middleware: access(deps, { scopes: ['read'] }),
    request: { query: TimingWindowQuerySchema },
    responses: { 200: jsonResponse(AttemptTimingsSchema, 'The timings'), ...problemResponses(400, 401, 403, 503) },
  });

  return router().openapi(timingsRoute, async (c) => {
    const { window } = c.req.valid('query');
    const timings = await attemptTimings(deps.database(c.env), window, tenantScope(c.var.principal));
    return c.json({ window, timings }, 200);
  });
}
