import type { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Queryable } from '../../db/types.js';
import {
  acknowledge,
  claimBatch,
  complete,
  extendLease,
  fail,
  getJob,
  release,
  releaseWorker,
} from '../../engine/index.js';
import { asKeyHolder, tenantScope } from '../auth/principal.js';
import type { AppDeps, AppEnv } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { forbidden, jobNotFound } from '../problem.js';
import { QueueParamsSchema } from '../schemas/enqueue.js';
import { JobIdParamsSchema, JobSchema } from '../schemas/job.js';
import {
  AcknowledgeBodySchema,
  AcknowledgeResponseSchema,
  ClaimBodySchema,
  ClaimResponseSchema,
  CompleteBodySchema,
  ExtendBodySchema,
  ExtendResponseSchema,
  FailBodySchema,
  ReleaseBodySchema,
  ReleasedJobsSchema,
  WorkerParamsSchema,
} from '../schemas/pull.js';
import { router } from '../validation.js';

/** Jobs one release of a worker hands back at most; a full answer means: call again. */
const RELEASE_PAGE = 1000;

const LEASE_PROBLEMS = problemResponses(400, 401, 403, 404, 409, 413, 503);

/**
 * Changes one claimed job. The lease token already fences the change; a
 * tenant-bound key is also held to its tenant, so a leaked token of another
 * tenant's job opens nothing (one more read, for tenant-bound keys only).
 */
async function changeLeasedJob<T>(
  c: Context<AppEnv>,
  deps: AppDeps,
  id: string,
  change: (database: Queryable) => Promise<T>,
): Promise<T> {
  const database = deps.database(c.env);
  const scope = tenantScope(c.var.principal);
  if (scope.tenant !== undefined && (await getJob(database, id, scope)) === undefined) throw jobNotFound();
  return change(database);
}

interface LeaseRouteConfig<Action extends string, Body extends z.ZodType, Response extends z.ZodType> {
  action: Action;
  operationId: string;
  summary: string;
  description: string;
  body: Body;
  response: Response;
}

/** A pull-API route on one claimed job: POST /v1/jobs/{id}/<action> with a lease token in the body. */
function leaseRoute<const Action extends string, Body extends z.ZodType, Response extends z.ZodType>(
  deps: AppDeps,
  { action, operationId, summary, description, body, response }: LeaseRouteConfig<Action, Body, Response>,
) {
  return authorizedRoute(
    deps,
    { scopes: ['worker'] },
    {
      method: 'post',
      path: `/v1/jobs/{id}/${action}` as const,
      operationId,
      tags: ['pull'],
      summary,
      description: `${description} Answers 409 when the lease token no longer holds the job.`,
      request: { params: JobIdParamsSchema, body: jsonBody(body) },
      responses: { 200: jsonResponse(response, 'Done'), ...LEASE_PROBLEMS },
    },
  );
}

export function pullRoutes(deps: AppDeps) {
  const claimRoute = authorizedRoute(
    deps,
    { scopes: ['worker'] },
    {
      method: 'post',
      path: '/v1/queues/{queue}/claim',
      operationId: 'claimJobs',
      tags: ['pull'],
      summary: 'Claim jobs to run (pull API)',
      description:
        'Claims up to `max` ready jobs of the queue, fairly across tenants and within their limits; each comes ' +
        'with the `leaseToken` its worker must present. An empty list when none is ready. A key bound to a worker ' +
        'id claims under that id only (403 for another).',
      request: { params: QueueParamsSchema, body: jsonBody(ClaimBodySchema) },
      responses: {
        200: jsonResponse(ClaimResponseSchema, 'The claimed jobs'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );
  const completeRoute = leaseRoute(deps, {
    action: 'complete',
    operationId: 'completeJob',
    summary: 'Complete a claimed job',
    description: 'Stores the result; the job succeeded.',
    body: CompleteBodySchema,
    response: JobSchema,
  });
  const failRoute = leaseRoute(deps, {
    action: 'fail',
    operationId: 'failJob',
    summary: 'Fail an attempt of a claimed job',
    description:
      'The job retries after its backoff (or `retryInSeconds`) unless its attempts are spent or `forGood` is set.',
    body: FailBodySchema,
    response: JobSchema,
  });
  const extendRoute = leaseRoute(deps, {
    action: 'extend',
    operationId: 'extendLease',
    summary: "Extend a claimed job's lease (heartbeat)",
    description: 'Optionally saves progress. `cancelRequested` tells the worker to stop.',
    body: ExtendBodySchema,
    response: ExtendResponseSchema,
  });
  const releaseRoute = leaseRoute(deps, {
    action: 'release',
    operationId: 'releaseJob',
    summary: 'Hand a claimed job back',
    description: 'The job waits again, after `delaySeconds` when given.',
    body: ReleaseBodySchema,
    response: JobSchema,
  });

  const acknowledgeRoute = authorizedRoute(
    deps,
    { scopes: ['worker'] },
    {
      method: 'post',
      path: '/v1/jobs/acknowledge',
      operationId: 'acknowledgeJobs',
      tags: ['pull'],
      summary: 'Complete, fail and hand back many claimed jobs at once',
      description:
        'Each job with the lease token its claim handed out, up to 1,000 in one request. A job whose token no ' +
        'longer holds it is listed under `stale` and changes nothing; the others are done all the same. A ' +
        "tenant-bound key reaches its own tenant's jobs only (another's are reported stale).",
      request: { body: jsonBody(AcknowledgeBodySchema) },
      responses: {
        200: jsonResponse(AcknowledgeResponseSchema, 'What became of each job'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  const releaseWorkerRoute = authorizedRoute(
    deps,
    { scopes: ['worker'] },
    {
      method: 'post',
      path: '/v1/workers/{workerId}/release',
      operationId: 'releaseWorker',
      tags: ['pull'],
      summary: 'Hand back every job a worker holds',
      description:
        'For a worker that knows it crashed and restarts under the same workerId: its jobs wait again at once ' +
        'instead of when their leases end (the attempt counts; a job on its last attempt fails). Only a key bound to ' +
        'that workerId may call it (403 for any other, admin included): handing back the jobs of a worker that still ' +
        "runs them would run each twice at once. A tenant-bound key hands back its own tenant's jobs only. At most " +
        '1,000 jobs an answer: call again while one comes back full.',
      request: { params: WorkerParamsSchema },
      responses: {
        200: jsonResponse(ReleasedJobsSchema, 'The jobs handed back'),
        ...problemResponses(400, 401, 403, 503),
      },
    },
  );

  return router()
    .openapi(claimRoute, async (c) => {
      const { max, leaseSeconds, workerId, types, traceContext } = c.req.valid('json');
      const { workerId: boundTo } = asKeyHolder(c.var.principal);
      if (boundTo !== null && workerId !== boundTo) {
        throw forbidden(`this key claims as worker ${boundTo} only`, [
          { path: 'workerId', message: `must be ${boundTo} with this key` },
        ]);
      }
      const jobs = await claimBatch(deps.database(c.env), {
        max,
        leaseSeconds,
        workerId,
        types,
        queues: [c.req.valid('param').queue],
        ...tenantScope(c.var.principal),
        traceContexts: traceContext === true,
      });
      return c.json({ jobs }, 200);
    })
    .openapi(completeRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { leaseToken, result } = c.req.valid('json');
      const completion = { id, leaseToken, result };
      return c.json(await changeLeasedJob(c, deps, id, (database) => complete(database, completion)), 200);
    })
    .openapi(failRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { leaseToken, error = null, retryInSeconds, forGood } = c.req.valid('json');
      const failure = { id, leaseToken, error, retryInSeconds, forGood };
      return c.json(await changeLeasedJob(c, deps, id, (database) => fail(database, failure)), 200);
    })
    .openapi(extendRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { leaseToken, leaseSeconds, progress } = c.req.valid('json');
      const extend = (database: Queryable) => extendLease(database, { id, leaseToken }, { leaseSeconds, progress });
      return c.json(await changeLeasedJob(c, deps, id, extend), 200);
    })
    .openapi(releaseRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { leaseToken, delaySeconds, countAttempt } = c.req.valid('json');
      const handBack = (database: Queryable) => release(database, { id, leaseToken }, { delaySeconds, countAttempt });
      return c.json(await changeLeasedJob(c, deps, id, handBack), 200);
    })
    .openapi(acknowledgeRoute, async (c) => {
      const { complete: completions, fail: failures, release: releases } = c.req.valid('json');
      const acknowledgements = {
        complete: completions,
        fail: failures?.map(({ error = null, ...failure }) => ({ ...failure, error })),
        release: releases,
      };
      return c.json(await acknowledge(deps.database(c.env), acknowledgements, tenantScope(c.var.principal)), 200);
    })
    .openapi(releaseWorkerRoute, async (c) => {
      const { workerId } = c.req.valid('param');
      const holder = asKeyHolder(c.var.principal);
      if (holder.workerId !== workerId) {
        throw forbidden(
          `only a key bound to worker ${workerId} may hand back its jobs: if that worker still ran them, each would run twice at ` +
            'once. The worker itself calls this when it starts again after a crash, with a key made for it (POST /v1/keys with workerId).',
        );
      }
      const options = { limit: RELEASE_PAGE, ...tenantScope(holder) };
      const jobs = await releaseWorker(deps.database(c.env), workerId, options);
      return c.json({ jobs }, 200);
    });
}
