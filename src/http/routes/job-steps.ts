import { getJobSteps } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import { jobNotFound } from '../problem.js';
import { JobIdParamsSchema } from '../schemas/job.js';
import { JobStepsSchema } from '../schemas/steps.js';
import { router } from '../validation.js';

export function jobStepsRoutes(deps: AppDeps) {
  const jobStepsRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/jobs/{id}/steps',
      operationId: 'getJobSteps',
      tags: ['jobs'],
      summary: "A job's durable steps, what it waits for, and the jobs it is linked to",
      description:
        'The steps its handler recorded (`ctx.step`), what a parked job waits for now (an event, a child, ' +
        'dependencies), and its children, parent, dependencies and dependents. Keys only.',
      request: { params: JobIdParamsSchema },
      responses: { 200: jsonResponse(JobStepsSchema, 'The steps'), ...problemResponses(400, 401, 403, 404, 503) },
    },
  );

  return router().openapi(jobStepsRoute, async (c) => {
    const steps = await getJobSteps(deps.database(c.env), c.req.valid('param').id, tenantScope(c.var.principal));
    if (steps === null) throw jobNotFound();
    return c.json(steps, 200);
  });
}
