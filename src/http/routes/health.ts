import { createRoute, z } from '@hono/zod-openapi';
import type { AppDeps } from '../context.js';
import { jsonResponse, problemResponses, PUBLIC_SECURITY } from '../openapi-responses.js';
import { Problem } from '../problem.js';
import { router } from '../validation.js';

const HealthSchema = z
  .object({
    status: z.literal('ok'),
    database: z.object({ ok: z.literal(true), latencyMs: z.number() }),
  })
  .openapi('Health');

export function healthRoutes(deps: AppDeps) {
  const healthRoute = createRoute({
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    tags: ['health'],
    security: PUBLIC_SECURITY,
    summary: 'Liveness, with a database round trip',
    responses: { 200: jsonResponse(HealthSchema, 'Up, and the database answers'), ...problemResponses(503) },
  });

  return router().openapi(healthRoute, async (c) => {
    const started = Date.now();
    try {
      await deps.database(c.env).query({ text: 'SELECT 1 AS ok', params: [] });
    } catch (error) {
      // Whatever the failure (down, wrong database, bad credentials), the Worker is not healthy.
      const detail = error instanceof Error ? error.message : String(error);
      throw new Problem(503, 'database-unavailable', 'Database unavailable', detail);
    }
    return c.json({ status: 'ok' as const, database: { ok: true as const, latencyMs: Date.now() - started } }, 200);
  });
}
