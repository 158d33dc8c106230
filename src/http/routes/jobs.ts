import { z } from '@hono/zod-openapi';
import type { Queryable } from '../../db/types.js';
import {
  cancel,
  listJobs,
  MAX_ERROR_SEARCH,
  reschedule,
  retry,
  type Job,
  type JobPage,
  type ListJobsOptions,
} from '../../engine/index.js';
import { asKeyHolder, type Principal, tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { changedJobFor, jobReader } from '../job-reader.js';
import { matchesIfNoneMatch, pollJob, POLL_INTERVAL_MS, type JobVersion } from '../job-versions.js';
import { LIMITS } from '../limits.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { conflict, jobNotFound, tooManyRequests } from '../problem.js';
import { NameSchema, PayloadMatchQuerySchema, queryNumberSchema, TagQuerySchema } from '../schemas/common.js';
import { RescheduleBodySchema } from '../schemas/enqueue.js';
import {
  ChangedJobSchema,
  JobIdParamsSchema,
  JobPageSchema,
  JobSchema,
  JobStatusSchema,
  JobStatusViewSchema,
} from '../schemas/job.js';
import type { JobStatusView } from '../status-view.js';
import { router } from '../validation.js';
import { WatcherSlots } from '../watcher-slots.js';

const GetJobQuerySchema = z.object({
  wait: queryNumberSchema(0, LIMITS.maxWaitSeconds)
    .optional()
    .describe(
      `Wait up to this many seconds (at most ${LIMITS.maxWaitSeconds}) for the job to change: from the ` +
        `If-None-Match ETag when sent, else from its state now. At most ${LIMITS.maxWaitsPerJob} requests wait on ` +
        'one job at once (per Worker isolate); more answer 429.',
    ),
  token: z.string().optional().describe("The statusUrl's token, instead of an API key."),
});

export const ListJobsQuerySchema = z.object({
  queue: NameSchema.optional(),
  tenant: NameSchema.optional(),
  status: JobStatusSchema.optional(),
  type: NameSchema.optional(),
  tag: TagQuerySchema.optional(),
  payload: PayloadMatchQuerySchema.optional(),
  error: z
    .string()
    .min(1)
    .max(MAX_ERROR_SEARCH)
    .optional()
    .describe("Finished jobs whose last error holds this text, in any case (live jobs don't match)."),
  cursor: z.string().max(64).optional().describe('The nextCursor of the previous page.'),
  limit: queryNumberSchema(1, LIMITS.maxPage, { integer: true })
    .optional()
    .describe(`Page size, 1 to ${LIMITS.maxPage}; default 50.`),
});

const WHOLE_JOB_NEEDS_READ =
  'Answers the whole job to a key with the read scope, else its JobReference (id and status).';

/**
 * A page of the jobs list as the caller may see it: a tenant-bound key asking for another tenant's jobs sees none.
 * Takes the list's query (`tag`, repeatable, is the engine's `tags`).
 */
export async function listJobsFor(
  db: Queryable,
  principal: Principal,
  { tenant, tag, ...filters }: Omit<ListJobsOptions, 'maxBytes' | 'tags'> & { tag?: readonly string[] },
): Promise<JobPage> {
  const bound = tenantScope(principal).tenant;
  if (bound !== undefined && tenant !== undefined && tenant !== bound) return { jobs: [], nextCursor: null };
  return listJobs(db, { ...filters, tags: tag, tenant: bound ?? tenant, maxBytes: LIMITS.maxPageBytes });
}

export function jobRoutes(deps: AppDeps) {
  const getJobRoute = authorizedRoute(
    deps,
    { scopes: ['read'], statusToken: true },
    {
      method: 'get',
      path: '/v1/jobs/{id}',
      operationId: 'getJob',
      tags: ['jobs'],
      summary: "A job's status and stats",
      description:
        "Sends an ETag and answers 304 to a matching If-None-Match. Opens with an API key or the job's status token, " +
        'which sees the status view only: status, attempts, times, and what the job definition publishes.',
      request: { params: JobIdParamsSchema, query: GetJobQuerySchema },
      responses: {
        200: jsonResponse(
          z.union([JobSchema, JobStatusViewSchema]),
          'The job to an API key; its status view (JobStatusView) to its status token',
        ),
        304: { description: 'The job still matches If-None-Match' },
        ...problemResponses(400, 401, 403, 404, 503),
      },
    },
  );

  const listJobsRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/jobs',
      operationId: 'listJobs',
      tags: ['jobs'],
      summary: 'List jobs, newest first',
      description:
        `A page holds up to \`limit\` jobs, and ends early once their JSON reaches ${LIMITS.maxPageBytes} bytes ` +
        '(one job always comes); `nextCursor` continues it.',
      request: { query: ListJobsQuerySchema },
      responses: { 200: jsonResponse(JobPageSchema, 'One page of jobs'), ...problemResponses(400, 401, 403, 503) },
    },
  );

  const cancelRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'] },
    {
      method: 'post',
      path: '/v1/jobs/{id}/cancel',
      operationId: 'cancelJob',
      tags: ['jobs'],
      summary: 'Cancel a job',
      description:
        'A waiting job is cancelled at once (200). A running one is marked (202): its worker sees ' +
        '`cancelRequested` at its next heartbeat. A finished job answers 409. ' +
        WHOLE_JOB_NEEDS_READ,
      request: { params: JobIdParamsSchema },
      responses: {
        200: jsonResponse(ChangedJobSchema, 'The job is cancelled'),
        202: jsonResponse(ChangedJobSchema, 'The job is running; its cancellation is requested'),
        ...problemResponses(400, 401, 403, 404, 409, 503),
      },
    },
  );

  const retryRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'] },
    {
      method: 'post',
      path: '/v1/jobs/{id}/retry',
      operationId: 'retryJob',
      tags: ['jobs'],
      summary: 'Run a failed, cancelled or expired job again',
      description: `With a fresh set of attempts. Any other status answers 409. ${WHOLE_JOB_NEEDS_READ}`,
      request: { params: JobIdParamsSchema },
      responses: {
        200: jsonResponse(ChangedJobSchema, 'The job is queued again'),
        ...problemResponses(400, 401, 403, 404, 409, 503),
      },
    },
  );

  const rescheduleRoute = authorizedRoute(
    deps,
    { scopes: ['enqueue'] },
    {
      method: 'patch',
      path: '/v1/jobs/{id}',
      operationId: 'rescheduleJob',
      tags: ['jobs'],
      summary: "Change a waiting job's priority or start time",
      description:
        'Only a waiting job (scheduled, queued or retrying) can be changed; a running or finished one answers 409, ' +
        "as does a start time at or past the job's expiresAt. The change is recorded in the job's history as `rescheduled`. " +
        WHOLE_JOB_NEEDS_READ,
      request: { params: JobIdParamsSchema, body: jsonBody(RescheduleBodySchema) },
      responses: {
        200: jsonResponse(ChangedJobSchema, 'The job waits with its new priority and start time'),
        ...problemResponses(400, 401, 403, 404, 409, 503),
      },
    },
  );

  const waits = new WatcherSlots(LIMITS.maxWaitsPerJob);

  return router()
    .openapi(getJobRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { wait = 0 } = c.req.valid('query');
      const ifNoneMatch = c.req.header('if-none-match');
      const reads = 1 + Math.ceil((wait * 1000) / POLL_INTERVAL_MS);
      const release = wait > 0 ? waits.acquire(id) : () => {};
      if (release === undefined) {
        const detail = `${LIMITS.maxWaitsPerJob} requests already wait on this job: retry without ?wait, or later`;
        throw tooManyRequests('too-many-watchers', 'Too many watchers', detail, 1);
      }

      let latest: JobVersion<Job | JobStatusView> | undefined;
      let first: string | undefined;
      try {
        for await (const version of pollJob(jobReader(deps, c, id), reads)) {
          if (version === undefined) throw jobNotFound();
          latest = version;
          first ??= version.etag;
          const unchanged =
            ifNoneMatch === undefined ? version.etag === first : matchesIfNoneMatch(ifNoneMatch, version.etag);
          if (!unchanged) break;
        }
      } finally {
        release();
      }
      const { job, etag } = latest!;
      const headers = { etag, 'cache-control': 'no-cache' };
      if (ifNoneMatch !== undefined && matchesIfNoneMatch(ifNoneMatch, etag)) return c.body(null, 304, headers);
      return c.json(job, 200, headers);
    })
    .openapi(listJobsRoute, async (c) =>
      c.json(await listJobsFor(deps.database(c.env), c.var.principal, c.req.valid('query')), 200),
    )
    .openapi(cancelRoute, async (c) => {
      const holder = asKeyHolder(c.var.principal);
      const cancelled = await cancel(deps.database(c.env), c.req.valid('param').id, tenantScope(holder));
      if (cancelled === undefined) throw jobNotFound();
      switch (cancelled.outcome) {
        case 'cancelled':
          return c.json(changedJobFor(holder, cancelled.job), 200);
        case 'cancel_requested':
          return c.json(changedJobFor(holder, cancelled.job), 202);
        case 'already_finished':
          throw conflict('already-finished', 'Already finished', `the job already ended ${cancelled.job.status}`);
      }
    })
    .openapi(retryRoute, async (c) => {
      const holder = asKeyHolder(c.var.principal);
      const retried = await retry(deps.database(c.env), c.req.valid('param').id, tenantScope(holder));
      if (retried === undefined) throw jobNotFound();
      if (!retried.retried) {
        const detail = `the job is ${retried.job.status}; only failed, cancelled or expired jobs can be retried`;
        throw conflict('not-retryable', 'Not retryable', detail);
      }
      return c.json(changedJobFor(holder, retried.job), 200);
    })
    .openapi(rescheduleRoute, async (c) => {
      const { id } = c.req.valid('param');
      const holder = asKeyHolder(c.var.principal);
      const changed = await reschedule(deps.database(c.env), id, c.req.valid('json'), tenantScope(holder));
      if (changed === undefined) throw jobNotFound();
      switch (changed.outcome) {
        case 'rescheduled':
          return c.json(changedJobFor(holder, changed.job), 200);
        case 'not_waiting':
          throw conflict(
            'not-waiting',
            'Not waiting',
            `the job is ${changed.job.status}; only a waiting job can be rescheduled`,
          );
        case 'after_expiry':
          throw conflict(
            'after-expiry',
            'Start after expiry',
            `the job expires at ${changed.job.expiresAt}; it could never start`,
          );
      }
    });
}
