import { createRoute, z } from '@hono/zod-openapi';
import { hasScope, type KeyHolder } from '../auth/principal.js';
import { optionalKeyHolder } from '../auth/access.js';
import type { AppDeps } from '../context.js';
import { logError } from '../logging.js';
import { jsonResponse, OPTIONAL_BEARER_SECURITY, problemResponses } from '../openapi-responses.js';
import { ProblemError, schemaMissingProblem } from '../problem.js';
import { router } from '../validation.js';

const HealthSchema = z
  .object({
    status: z.literal('ok'),
    database: z
      .object({ ok: z.literal(true), latencyMs: z.number() })
      .optional()
      .describe('The round trip: to an operator key only (read or admin, bound to no tenant).'),
  })
  .openapi('Health');

/** Keys of whoever runs the deployment: they may see how it is doing, and why it is not. */
function isOperator(holder: KeyHolder | undefined): holder is KeyHolder {
  return holder !== undefined && holder.tenant === null && hasScope(holder, ['read']);
}

export function healthRoutes(deps: AppDeps) {
  const healthRoute = createRoute({
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    tags: ['health'],
    summary: 'Liveness, with a database round trip',
    description:
      'Without a key: up (200) or down (503), nothing more. With an operator key (read or admin, bound to no ' +
      "tenant): the round trip's latency, and on 503 the database's own error. A database without skiplock's " +
      'schema answers 503 `schema-missing` to everyone.',
    security: OPTIONAL_BEARER_SECURITY,
    responses: { 200: jsonResponse(HealthSchema, 'Up, and the database answers'), ...problemResponses(401, 429, 503) },
  });

  return router().openapi(healthRoute, async (c) => {
    const holder = await optionalKeyHolder(c, deps);
    const started = Date.now();
    let migrated: boolean;
    try {
      const [row] = await deps.database(c.env).query<{ migrated: boolean }>({
        text: "SELECT to_regnamespace('skiplock') IS NOT NULL AS migrated",
        params: [],
      });
      migrated = row?.migrated === true;
    } catch (error) {
      // Whatever the failure (down, wrong database, bad credentials), the Worker is not healthy.
      logError(c.var.requestId, 'health_check_failed', error);
      const reason = error instanceof Error ? error.message : String(error);
      const detail = isOperator(holder) ? `the database did not answer: ${reason}` : 'the database did not answer';
      throw new ProblemError(503, 'database-unavailable', 'Database unavailable', detail);
    }
    // What to run is no secret of the database's: everyone gets it.
    if (!migrated) throw schemaMissingProblem();
    if (!isOperator(holder)) return c.json({ status: 'ok' as const }, 200);
    return c.json({ status: 'ok' as const, database: { ok: true as const, latencyMs: Date.now() - started } }, 200);
  });
}
