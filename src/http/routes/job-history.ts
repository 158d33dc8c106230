import { getJobEvents } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonResponse, problemResponses } from '../openapi-responses.js';
import { jobNotFound } from '../problem.js';
import { JobHistorySchema } from '../schemas/job-history.js';
import { JobIdParamsSchema } from '../schemas/job.js';
import { router } from '../validation.js';

export function jobHistoryRoutes(deps: AppDeps) {
  const jobHistoryRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/jobs/{id}/history',
      operationId: 'getJobHistory',
      tags: ['jobs'],
      summary: "A job's events, oldest first",
      description:
        "Every change of the job: enqueued, claimed, lease extended, failed, completed, retried… Those the job's own row " +
        'records (enqueued, each claim, completed) have no event id. Keys only: a status token does not open it.',
      request: { params: JobIdParamsSchema },
      responses: { 200: jsonResponse(JobHistorySchema, 'The events'), ...problemResponses(400, 401, 403, 404, 503) },
    },
  );

  return router().openapi(jobHistoryRoute, async (c) => {
    const events = await getJobEvents(deps.database(c.env), c.req.valid('param').id, tenantScope(c.var.principal));
    // Every job's history starts with its enqueue, so none means no job this caller may see.
    if (events.length === 0) throw jobNotFound();
    return c.json({ events }, 200);
  });
}
