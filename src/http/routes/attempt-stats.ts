import { attemptTimings, dailyAttemptStats } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import {
  AttemptTimingsSchema,
  DailyAttemptStatsSchema,
  DailyStatsQuerySchema,
  TimingWindowQuerySchema,
} from '../schemas/attempt-stats.js';
import { router } from '../validation.js';

export function attemptStatsRoutes(deps: AppDeps) {
  const timingsRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/stats/timings',
      operationId: 'getAttemptTimings',
      tags: ['stats'],
      summary: 'Wait and run times of attempts, per queue and tenant, over the last hour, day or week',
      description:
        "Exact p50 and p95 of how long attempts waited for their handler to start and how long they ran, read from the jobs and their events (so no further back than the history's retention). A tenant-bound key sees its own tenant's.",
      request: { query: TimingWindowQuerySchema },
      responses: { 200: jsonResponse(AttemptTimingsSchema, 'The timings'), ...problemResponses(400, 401, 403, 503) },
    },
  );

  const dailyRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/stats/daily',
      operationId: 'getDailyAttemptStats',
      tags: ['stats'],
      summary: 'Attempt counts and wait and run times per day, queue and tenant, kept after the jobs are pruned',
      description:
        "The daily rollup of attempts (kept STATS_RETENTION_DAYS, a year by default, however short the history's retention), with today's attempts up to now. Per day and over the whole period. A tenant-bound key sees its own tenant's.",
      request: { query: DailyStatsQuerySchema },
      responses: {
        200: jsonResponse(DailyAttemptStatsSchema, 'The daily statistics'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  return router()
    .openapi(timingsRoute, async (c) => {
      const { window } = c.req.valid('query');
      const timings = await attemptTimings(deps.database(c.env), window, tenantScope(c.var.principal));
      return c.json({ window, timings }, 200);
    })
    .openapi(dailyRoute, async (c) => {
      const { days } = c.req.valid('query');
      const stats = await dailyAttemptStats(deps.database(c.env), days, tenantScope(c.var.principal));
      return c.json({ days, ...stats }, 200);
    });
}
