import type { Context } from 'hono';
import type { PresentedApiKey } from '../auth/presented-api-key.js';
import { asKeyHolder, type KeyHolder } from '../auth/principal.js';
import type { AppDeps, AppEnv } from '../context.js';
import type { z } from '@hono/zod-openapi';
import { enqueueJobs, type EnqueueRequest } from '../enqueue-jobs.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import {
  EnqueueBatchBodySchema,
  EnqueueBatchResponseSchema,
  EnqueueBodySchema,
  EnqueueHeadersSchema,
  QueueParamsSchema,
} from '../schemas/enqueue.js';
import { EnqueueAnswerSchema, EnqueuedJobSchema } from '../schemas/job.js';
import { router } from '../validation.js';

const ENQUEUE_PROBLEMS = problemResponses(400, 401, 403, 409, 413, 422, 503);

export function enqueueRoutes(deps: AppDeps) {
  const enqueueRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'], keyCheckedByStatement: true },
    {
      method: 'post',
      path: '/v1/queues/{queue}/jobs',
      operationId: 'enqueueJob',
      tags: ['jobs'],
      summary: 'Enqueue a job',
      description:
        'Answers 201 with the new job, or 200 with `deduplicated: true` and the job that a dedupKey, debounceKey or ' +
        "Idempotency-Key matched (a job of the same queue and tenant); to a key without the read scope, that job's " +
        'id and status only. `debounced: true` or `replaced: true` say the enqueue gave that job its payload. ' +
        '409 when dedupOnConflict refuse (or replace of a started job) met a job holding the key, naming it.',
      request: { params: QueueParamsSchema, headers: EnqueueHeadersSchema, body: jsonBody(EnqueueBodySchema) },
      responses: {
        201: jsonResponse(EnqueuedJobSchema, 'The job was created'),
        200: jsonResponse(
          EnqueueAnswerSchema,
          'A job with the same dedup key or Idempotency-Key already existed (by id and status only for a key without read)',
        ),
        ...ENQUEUE_PROBLEMS,
      },
    },
  );

  const enqueueBatchRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'], keyCheckedByStatement: true },
    {
      method: 'post',
      path: '/v1/queues/{queue}/jobs/batch',
      operationId: 'enqueueJobs',
      tags: ['jobs'],
      summary: 'Enqueue up to 1,000 jobs at once',
      description:
        'One transaction: one invalid job refuses the whole batch, naming its field (`jobs.3.priority`). ' +
        'Answers 201 when a job was created, 200 when every job was a dedup hit.',
      request: { params: QueueParamsSchema, headers: EnqueueHeadersSchema, body: jsonBody(EnqueueBatchBodySchema) },
      responses: {
        201: jsonResponse(EnqueueBatchResponseSchema, 'The jobs, in request order'),
        200: jsonResponse(EnqueueBatchResponseSchema, 'Every job already existed'),
        ...ENQUEUE_PROBLEMS,
      },
    },
  );

  return router()
    .openapi(enqueueRoute, async (c) => {
      const [job] = await enqueueJobs(c, deps, callerOf(c), {
        queue: c.req.valid('param').queue,
        jobs: [c.req.valid('json')],
        ...enqueueHeaders(c.req.valid('header')),
        batch: false,
      });
      // One job in, one job out.
      const enqueued = job!;
      if (enqueued.deduplicated) return c.json(enqueued, 200);
      return c.json(enqueued, 201, { location: `/v1/jobs/${enqueued.id}` });
    })
    .openapi(enqueueBatchRoute, async (c) => {
      const jobs = await enqueueJobs(c, deps, callerOf(c), {
        queue: c.req.valid('param').queue,
        jobs: c.req.valid('json').jobs,
        ...enqueueHeaders(c.req.valid('header')),
        batch: true,
      });
      return c.json({ jobs }, jobs.every((job) => job.deduplicated) ? 200 : 201);
    });
}

/** The caller: its key holder, or the API key the enqueue's statement checks. */
function callerOf(c: Context<AppEnv>): KeyHolder | PresentedApiKey {
  return c.var.presentedKey ?? asKeyHolder(c.var.principal);
}

/** What an enqueue request's headers say: its Idempotency-Key, and the trace context its jobs keep. */
function enqueueHeaders(
  headers: z.output<typeof EnqueueHeadersSchema>,
): Pick<EnqueueRequest, 'idempotencyKey' | 'traceContext'> {
  const { traceparent, tracestate } = headers;
  return {
    idempotencyKey: headers['idempotency-key'],
    traceContext:
      traceparent === undefined ? undefined : tracestate === undefined ? { traceparent } : { traceparent, tracestate },
  };
}
