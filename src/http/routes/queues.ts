import type { Queryable } from '../../db/types.js';
import {
  getQueue,
  listQueueSettings,
  pauseQueue,
  queueHealth,
  queueStats,
  resumeQueue,
  setQueue,
  type DeliveryTarget,
  type QueueStatsRow,
  type TenantScope,
} from '../../engine/index.js';
import { tenantScope } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { validationProblem } from '../problem.js';
import { summarizeQueues } from '../queue-summaries.js';
import { QueueParamsSchema } from '../schemas/enqueue.js';
import { QueueSchema, QueueSettingsBodySchema } from '../schemas/queue.js';
import { QueueListSchema, StatsResponseSchema } from '../schemas/stats.js';
import { router } from '../validation.js';

/** A tenant-bound key counts only its own tenant's jobs. */
async function visibleStats(database: Queryable, scope: TenantScope): Promise<QueueStatsRow[]> {
  const rows = await queueStats(database);
  return scope.tenant === undefined ? rows : rows.filter((row) => row.tenant === scope.tenant);
}

/** A queue as a caller may see it: a tenant-bound key does not see where the queue's jobs go. */
function withoutTargetFor<Queue extends { delivery?: unknown }>(
  scope: TenantScope,
  queue: Queue,
): Queue | Omit<Queue, 'delivery'> {
  if (scope.tenant === undefined) return queue;
  const { delivery: _operators, ...visible } = queue;
  return visible;
}

/** Whether two targets say the same (the stored one comes back from jsonb, its keys in another order). */
function sameTarget(stored: DeliveryTarget | null, given: DeliveryTarget): boolean {
  if (stored === null) return false;
  const kept = new Map<string, unknown>(Object.entries(stored));
  const entries = Object.entries(given);
  return entries.length === kept.size && entries.every(([key, value]) => kept.get(key) === value);
}

export function queueRoutes(deps: AppDeps) {
  const queuesRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/queues',
      operationId: 'listQueues',
      tags: ['stats'],
      summary: 'Job counts per queue and status, and the oldest waiting age',
      responses: { 200: jsonResponse(QueueListSchema, 'Every queue with jobs'), ...problemResponses(401, 403, 503) },
    },
  );

  const statsRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/stats',
      operationId: 'getStats',
      tags: ['stats'],
      summary: 'Job counts per queue, tenant and status (finished: last hour), and the queue health',
      responses: {
        200: jsonResponse(StatsResponseSchema, 'One row per queue, tenant and status, and the health view'),
        ...problemResponses(401, 403, 503),
      },
    },
  );

  const putQueueRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'put',
      path: '/v1/queues/{queue}',
      operationId: 'setQueue',
      tags: ['queues'],
      summary: "Set a queue's concurrency cap, rate limit, weight, delivery target, retention and dead-letter queue",
      description:
        'Replaces them all; one left out takes its default (no cap, no rate limit, weight 1, no delivery target, the default ' +
        "retention, no dead-letter queue). The cap counts the queue's " +
        'running jobs over all tenants, the rate limit its starts over all tenants (a count of 1 to 10000 per 1 to 86400 ' +
        "seconds; the excess waits in the queue, or with onExcess drop ends cancelled at enqueue); the weight shares each tenant's turns among its queues. With a delivery target, the " +
        "drains send the queue's jobs, whatever their type, to a batched webhook or a Cloudflare queue instead of to handlers; " +
        'a target the deployment cannot reach (a host off HTTP_ALLOWED_HOSTS, a missing secret or binding) is refused. ' +
        "The retention applies to the queue's finished jobs from the next housekeeping, those that finished before too. " +
        'A job that fails for good from then on moves to the dead-letter queue.',
      request: { params: QueueParamsSchema, body: jsonBody(QueueSettingsBodySchema) },
      responses: {
        200: jsonResponse(QueueSchema, 'The queue as it is now'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  const getQueueRoute = authorizedRoute(
    deps,
    { scopes: ['read'] },
    {
      method: 'get',
      path: '/v1/queues/{queue}',
      operationId: 'getQueue',
      tags: ['queues'],
      summary: "A queue's settings (its own or the defaults) and running jobs",
      request: { params: QueueParamsSchema },
      responses: { 200: jsonResponse(QueueSchema, 'The queue'), ...problemResponses(400, 401, 403, 503) },
    },
  );

  const pauseRoute = (action: 'pause' | 'resume') =>
    authorizedRoute(
      deps,
      { scopes: ['admin'] },
      {
        method: 'post',
        path: `/v1/queues/{queue}/${action}`,
        operationId: `${action}Queue`,
        tags: ['queues'],
        summary:
          action === 'pause'
            ? 'Pause a queue: no claim takes its jobs until it is resumed'
            : 'Resume a paused queue: the next claim may take its jobs',
        description:
          action === 'pause'
            ? 'Its waiting jobs, its settings and its running jobs are left as they are. Pausing a paused queue changes nothing.'
            : 'Resuming a running queue changes nothing.',
        request: { params: QueueParamsSchema },
        responses: {
          200: jsonResponse(QueueSchema, 'The queue as it is now'),
          ...problemResponses(400, 401, 403, 503),
        },
      },
    );

  return router()
    .openapi(pauseRoute('pause'), async (c) =>
      c.json(await pauseQueue(deps.database(c.env), c.req.valid('param').queue), 200),
    )
    .openapi(pauseRoute('resume'), async (c) => {
      const queue = await resumeQueue(deps.database(c.env), c.req.valid('param').queue);
      // Its jobs may be waiting: a drain now takes them, as after an enqueue.
      if (deps.onEnqueued) deps.onEnqueued(c.executionCtx, c.env);
      return c.json(queue, 200);
    })
    .openapi(putQueueRoute, async (c) => {
      const settings = c.req.valid('json');
      const { queue } = c.req.valid('param');
      const database = deps.database(c.env);
      // A target is checked when it changes: a cap can still be changed while a kept target is unreachable.
      if (settings.delivery !== null && !sameTarget((await getQueue(database, queue)).delivery, settings.delivery)) {
        const problem =
          deps.deliveryProblem === undefined
            ? { field: 'target', detail: 'this deployment delivers no queues' }
            : deps.deliveryProblem(c.env, settings.delivery);
        if (problem !== undefined) {
          const path = `delivery.${problem.field}`;
          throw validationProblem(`${path}: ${problem.detail}`, [{ path, message: problem.detail }]);
        }
      }
      return c.json(await setQueue(database, queue, settings), 200);
    })
    .openapi(getQueueRoute, async (c) => {
      const scope = tenantScope(c.var.principal);
      return c.json(
        withoutTargetFor(scope, await getQueue(deps.database(c.env), c.req.valid('param').queue, scope)),
        200,
      );
    })
    .openapi(queuesRoute, async (c) => {
      const database = deps.database(c.env);
      const scope = tenantScope(c.var.principal);
      const [rows, settings] = await Promise.all([visibleStats(database, scope), listQueueSettings(database)]);
      return c.json({ queues: summarizeQueues(rows, settings).map((queue) => withoutTargetFor(scope, queue)) }, 200);
    })
    .openapi(statsRoute, async (c) => {
      const database = deps.database(c.env);
      const scope = tenantScope(c.var.principal);
      const [stats, health] = await Promise.all([visibleStats(database, scope), queueHealth(database, scope)]);
      if (scope.tenant === undefined) return c.json({ stats, health }, 200);
      // The database's own figures (every tenant's rows, other sessions) are not a tenant's to see.
      const { oldestWaitingSeconds, expiredLeasesReaped } = health;
      return c.json({ stats, health: { oldestWaitingSeconds, expiredLeasesReaped } }, 200);
    });
}
