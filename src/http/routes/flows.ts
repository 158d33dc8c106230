import { enqueueFlow } from '../../engine/index.js';
import { asKeyHolder } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { forbidden } from '../problem.js';
import { FlowBodySchema, FlowResponseSchema } from '../schemas/steps.js';
import { router } from '../validation.js';

export function flowRoutes(deps: AppDeps) {
  const enqueueFlowRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'] },
    {
      method: 'post',
      path: '/v1/flows',
      operationId: 'enqueueFlow',
      tags: ['jobs'],
      summary: 'Enqueue a graph of jobs',
      description:
        'All or none, in one transaction. A job with `dependsOn` waits (parked, holding nothing) until the jobs it ' +
        'names have ended; if one fails it fails too, unless that dependency says `onFailure: "run"`. A cycle is ' +
        'refused by naming it (400), as is a dependency on a ref not in the flow.',
      request: { body: jsonBody(FlowBodySchema) },
      responses: {
        201: jsonResponse(FlowResponseSchema, 'The jobs, in request order'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  return router().openapi(enqueueFlowRoute, async (c) => {
    const body = c.req.valid('json');
    const holder = asKeyHolder(c.var.principal);
    if (holder.tenant !== null && body.tenant !== undefined && body.tenant !== holder.tenant) {
      throw forbidden(`this key enqueues only for tenant ${holder.tenant}`, [
        { path: 'tenant', message: `must be ${holder.tenant} (or left out) with this key` },
      ]);
    }
    const jobs = await enqueueFlow(deps.database(c.env), {
      ...body,
      tenant: holder.tenant ?? body.tenant ?? 'default',
    });
    return c.json(
      {
        jobs: jobs.map((job, index) => ({
          ref: body.jobs[index]!.ref,
          id: job.id,
          status: job.status,
          runAt: job.runAt,
        })),
      },
      201,
    );
  });
}
