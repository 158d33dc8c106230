import { handBackJobTypeRetention, listJobTypeRetentions, setJobTypeRetention } from '../../engine/index.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import {
  JobTypeParamsSchema,
  JobTypeRetentionBodySchema,
  JobTypeRetentionListSchema,
  JobTypeRetentionSchema,
} from '../schemas/job-type.js';
import { router } from '../validation.js';

/** A job type's retention: from its definition, or an operator's, which wins until handed back. */
export function jobTypeRoutes(deps: AppDeps) {
  const listRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/job-types',
      operationId: 'listJobTypeRetentions',
      tags: ['queues'],
      summary: 'The job types with a retention of their own, and who set it',
      responses: {
        200: jsonResponse(JobTypeRetentionListSchema, 'Each type a definition or an operator gave a retention'),
        ...problemResponses(401, 403, 503),
      },
    },
  );

  const putRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'put',
      path: '/v1/job-types/{type}/retention',
      operationId: 'setJobTypeRetention',
      tags: ['queues'],
      summary: "Set a job type's retention as an operator",
      description:
        "It wins over the type's definition (the drains no longer write it) until it is handed back with DELETE, and applies " +
        'from the next housekeeping, to the jobs that finished before too.',
      request: { params: JobTypeParamsSchema, body: jsonBody(JobTypeRetentionBodySchema) },
      responses: {
        200: jsonResponse(JobTypeRetentionSchema, 'The type as it is now'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  const deleteRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'delete',
      path: '/v1/job-types/{type}/retention',
      operationId: 'handBackJobTypeRetention',
      tags: ['queues'],
      summary: "Hand a job type's retention back to its definition",
      description:
        "Cleared now (its queue's retention or the default applies), then written by the next drain that runs the type.",
      request: { params: JobTypeParamsSchema },
      responses: {
        200: jsonResponse(JobTypeRetentionSchema, 'The type as it is now'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  return router()
    .openapi(listRoute, async (c) => c.json({ jobTypes: await listJobTypeRetentions(deps.database(c.env)) }, 200))
    .openapi(putRoute, async (c) => {
      const { type } = c.req.valid('param');
      const { retentionSeconds } = c.req.valid('json');
      return c.json(await setJobTypeRetention(deps.database(c.env), type, retentionSeconds), 200);
    })
    .openapi(deleteRoute, async (c) =>
      c.json(await handBackJobTypeRetention(deps.database(c.env), c.req.valid('param').type), 200),
    );
}
