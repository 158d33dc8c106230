import { getTenant, setTenant } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { notFound } from '../problem.js';
import { TenantParamsSchema, TenantSchema, TenantSettingsBodySchema } from '../schemas/tenant.js';
import { router } from '../validation.js';

export function tenantRoutes(deps: AppDeps) {
  const putTenantRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'put',
      path: '/v1/tenants/{tenant}',
      operationId: 'setTenant',
      tags: ['tenants'],
      summary: "Set a tenant's concurrency, rate limit and weight",
      description: 'Replaces all three; one left out takes its default (no limit, weight 1).',
      request: { params: TenantParamsSchema, body: jsonBody(TenantSettingsBodySchema) },
      responses: {
        200: jsonResponse(TenantSchema, 'The tenant as it is now'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  const getTenantRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/tenants/{tenant}',
      operationId: 'getTenant',
      tags: ['tenants'],
      summary: "A tenant's settings (its own or the defaults) and running jobs",
      request: { params: TenantParamsSchema },
      responses: { 200: jsonResponse(TenantSchema, 'The tenant'), ...problemResponses(400, 401, 403, 404, 503) },
    },
  );

  return router()
    .openapi(putTenantRoute, async (c) =>
      c.json(await setTenant(deps.database(c.env), c.req.valid('param').tenant, c.req.valid('json')), 200),
    )
    .openapi(getTenantRoute, async (c) => {
      const { tenant } = c.req.valid('param');
      const bound = tenantScope(c.var.principal).tenant;
      if (bound !== undefined && bound !== tenant) throw notFound('no such tenant, or none this key may see');
      return c.json(await getTenant(deps.database(c.env), tenant), 200);
    });
}
