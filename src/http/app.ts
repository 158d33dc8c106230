import type { Context, MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import { requestId } from 'hono/request-id';
import { DatabaseError } from '../db/errors.js';
import { FailedAuthentications } from './auth/failed-authentications.js';
import type { AppDeps, AppEnv } from './context.js';
import { limitBodySize } from './limits.js';
import { API_TAGS } from './openapi-tags.js';
import { logError, requestLog } from './logging.js';
import { problemFor } from './error-mapping.js';
import { notFound, ProblemError, renderProblem } from './problem.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { concurrencyKeyRoutes } from './routes/concurrency-keys.js';
import { enqueueRoutes } from './routes/enqueue.js';
import { attemptStatsRoutes } from './routes/attempt-stats.js';
import { bulkActionRoutes } from './routes/bulk-actions.js';
import { healthRoutes } from './routes/health.js';
import { jobEventRoutes } from './routes/job-events.js';
import { eventRoutes } from './routes/events.js';
import { flowRoutes } from './routes/flows.js';
import { jobStepsRoutes } from './routes/job-steps.js';
import { jobHistoryRoutes } from './routes/job-history.js';
import { jobRoutes } from './routes/jobs.js';
import { metricsRoutes } from './routes/metrics.js';
import { pullRoutes } from './routes/pull.js';
import { jobTypeRoutes } from './routes/job-types.js';
import { queueRoutes } from './routes/queues.js';
import { tenantRoutes } from './routes/tenants.js';
import { throughputRoutes } from './routes/throughput.js';
import { mountPath } from './status-url.js';
import { router } from './validation.js';

export type { ApiSettings, AppDeps, Bindings, WaitUntil } from './context.js';

/**
 * Browsers of the configured origins may call the API: a status page reads
 * one job with its token, a dashboard may use a key. Other origins get no
 * CORS headers, so their browsers refuse the response.
 */
function corsForConfiguredOrigins(deps: AppDeps): MiddlewareHandler<AppEnv> {
  // One middleware per list of origins: the settings, and so the list, are read once per environment.
  const byOrigins = new WeakMap<readonly string[], MiddlewareHandler<AppEnv>>();
  return (c, next) => {
    const origins = deps.settings(c.env).corsOrigins;
    let handler = byOrigins.get(origins);
    if (handler === undefined) {
      handler = cors({
        origin: [...origins],
        allowHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-None-Match', 'Last-Event-ID'],
        exposeHeaders: ['ETag', 'Location', 'Retry-After', 'X-Request-Id'],
        maxAge: 600,
      });
      byOrigins.set(origins, handler);
    }
    return handler(c, next);
  };
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** After each successful request that writes, tells the host the queue may have changed. */
function queueChanges(onQueueChanged: NonNullable<AppDeps['onQueueChanged']>): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (!READS.has(c.req.method) && c.res.status < 400) onQueueChanged(c.executionCtx, c.env);
  };
}

/**
 * The HTTP API. Build it once per isolate: everything per request (the
 * database, the secrets) comes from `c.env` through `deps`.
 */
export function createApp(deps: AppDeps) {
  const base = router();
  const failedAuthentications = new FailedAuthentications();
  base.use(requestId());
  base.use((c, next) => {
    c.set('failedAuthentications', failedAuthentications);
    return next();
  });
  base.use(requestLog((env) => deps.settings(env).logRequests));
  base.use(corsForConfiguredOrigins(deps));
  base.use(limitBodySize(deps));
  if (deps.onQueueChanged !== undefined) base.use(queueChanges(deps.onQueueChanged));
  const app = base
    .route('/', healthRoutes(deps))
    .route('/', enqueueRoutes(deps))
    .route('/', bulkActionRoutes(deps))
    .route('/', jobRoutes(deps))
    .route('/', jobEventRoutes(deps))
    .route('/', jobHistoryRoutes(deps))
    .route('/', jobStepsRoutes(deps))
    .route('/', eventRoutes(deps))
    .route('/', flowRoutes(deps))
    .route('/', pullRoutes(deps))
    .route('/', queueRoutes(deps))
    .route('/', jobTypeRoutes(deps))
    .route('/', concurrencyKeyRoutes(deps))
    .route('/', throughputRoutes(deps))
    .route('/', attemptStatsRoutes(deps))
    .route('/', metricsRoutes(deps))
    .route('/', tenantRoutes(deps))
    .route('/', apiKeyRoutes(deps));

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key (or the ADMIN_TOKEN).',
  });
  // OpenAPI 3.1, whose JSON Schema says "any JSON value, null included" and "a $ref or null", which 3.0's `nullable` cannot.
  let openApiDocument: ReturnType<typeof app.getOpenAPI31Document> | undefined;
  app.get('/v1/openapi.json', (c) => {
    openApiDocument ??= app.getOpenAPI31Document({
      openapi: '3.1.0',
      info: {
        title: 'skiplock',
        version: '1',
        description: 'A job queue in your own Postgres, on Cloudflare Workers.',
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      tags: [...API_TAGS],
    });
    // The deployment that serves the document is the server its clients call, under the path a host mounted it at.
    const server = new URL(mountPath(c) || '/', c.req.url).href.replace(/\/$/, '');
    return c.json({ ...openApiDocument, servers: [{ url: server }] });
  });

  app.notFound((c) => renderProblem(c, notFound(`no route ${c.req.method} ${c.req.path}`), c.var.requestId));
  app.onError(async (thrown, c) => {
    const error = await keyRefusalFirst(c, thrown);
    const problem = problemFor(error);
    // What the database said stays in the log, found again by the request id the problem carries.
    if (problem !== undefined && error instanceof DatabaseError) logError(c.var.requestId, 'database_error', error);
    if (problem !== undefined) return renderProblem(c, problem, c.var.requestId);
    logError(c.var.requestId, 'unexpected_error', error);
    const detail = `an unexpected error; its log line carries request id ${c.var.requestId}`;
    return renderProblem(c, new ProblemError(500, 'internal-error', 'Internal error', detail), c.var.requestId);
  });
  return app;
}

/**
 * What a request that failed before its API key was settled answers: the
 * key's refusal (401, 403) when it has one, as a route that looks the key up
 * first answers it, else the error. A body that does not validate tells a
 * bad key nothing of the route.
 */
async function keyRefusalFirst(c: Context<AppEnv>, error: unknown): Promise<unknown> {
  const presented = c.var.presentedKey;
  if (presented === undefined || presented.settled) return error;
  try {
    await presented.lookUp();
    return error;
  } catch (refusal) {
    return refusal instanceof ProblemError ? refusal : error;
  }
}

export type AppType = ReturnType<typeof createApp>;
