import { bulkAction } from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { LIMITS } from '../limits.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { BulkActionBodySchema, BulkActionResultSchema } from '../schemas/bulk.js';
import { JobPageSchema } from '../schemas/job.js';
import { router } from '../validation.js';
import { ListJobsQuerySchema, listJobsFor } from './jobs.js';

const DeadJobsQuerySchema = ListJobsQuerySchema.omit({ status: true });

export function bulkActionRoutes(deps: AppDeps) {
  const bulkRoute = authorizedRoute(
    deps,
    { scopes: ['operator'] },
    {
      method: 'post',
      path: '/v1/jobs/bulk',
      operationId: 'bulkJobs',
      tags: ['jobs'],
      summary: 'Retry, cancel, reschedule, delete or redrive every job matching a filter',
      description:
        'In batches of 500 jobs, each its own short transaction that skips the rows a claim holds, so a drain beside ' +
        'it is never blocked. Each changed job gets the event its single-job action writes, with `detail.bulk`. ' +
        '`dryRun` counts by status and changes nothing; a request without a filter is refused unless it says ' +
        `\`all: true\`; a filter that matches nothing answers \`matched: 0\`. One request runs at most ` +
        `${LIMITS.maxBulkBatches} batches and answers a \`nextCursor\` for the rest: send it back as \`cursor\`. ` +
        'Needs the operator scope; a key bound to a tenant acts on its tenant only. ' +
        'The answer carries counts, never jobs.',
      request: { body: jsonBody(BulkActionBodySchema) },
      responses: {
        200: jsonResponse(BulkActionResultSchema, 'What the action matched and changed'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  const deadJobsRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/dead-jobs',
      operationId: 'listDeadJobs',
      tags: ['jobs'],
      summary: 'The dead-letter set: jobs that failed for good, newest first',
      description:
        'The same page as `GET /v1/jobs?status=failed`. Redrive them with `POST /v1/jobs/bulk` ' +
        '(`{"action": "redrive", "filter": {"queue": ...}, "toQueue": ...}`).',
      request: { query: DeadJobsQuerySchema },
      responses: {
        200: jsonResponse(JobPageSchema, 'One page of failed jobs'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  return router()
    .openapi(bulkRoute, async (c) => {
      const request = c.req.valid('json');
      const scope = tenantScope(c.var.principal);
      const result = await bulkAction(deps.database(c.env), { ...request, maxBatches: LIMITS.maxBulkBatches }, scope);
      const waitingNow = request.action === 'retry' || request.action === 'redrive';
      if (waitingNow && result.changed > 0 && deps.onEnqueued) deps.onEnqueued(c.executionCtx, c.env);
      return c.json(result, 200);
    })
    .openapi(deadJobsRoute, async (c) => {
      const query = { ...c.req.valid('query'), status: 'failed' as const };
      return c.json(await listJobsFor(deps.database(c.env), c.var.principal, query), 200);
    });
}
