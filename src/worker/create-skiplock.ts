import type { ExecutionContext, Hono } from 'hono';
import type { Db } from '../db/types.js';
import type { JobDefinition } from '../drain/define-job.js';
import { builtInJobs } from '../drain/handlers/built-in.js';
import { destinationProblem, parseAllowedHosts } from '../drain/handlers/http-destination.js';
import type { PeriodicJob } from '../drain/periodic.js';
import { createRegistry } from '../drain/registry.js';
import { createApp } from '../http/app.js';
import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { AppDeps, AppEnv, Bindings, WaitUntil } from '../http/context.js';
import { notFound, ProblemError, problemResponse } from '../http/problem.js';
import { uiRoutes } from '../ui/index.js';
import { afterAnswer } from './after-answer.js';
import { requestDatabase, sessionDatabase } from './database.js';
import { workerDeliveries } from './deliveries.js';
import { fastPathDrain, scheduledDrain, type DrainRuntime } from './drain.js';
import type { Tracing } from '../engine/tracing.js';
import { drainerClass, type SkiplockDrainerClass } from './drainer.js';
import type { SkiplockEnv } from './env.js';
import { QueueClock } from './queue-clock.js';
import { requestDbAnsweringSchemaMissing, sessionDbAnsweringSchemaMissing } from './schema-missing.js';
import { ConfigurationError, resolveSettings, type SkiplockSettings } from './settings.js';

export interface SkiplockOptions extends SkiplockSettings {
  /** Your job types (`defineJob`): the drains run these, and enqueue checks their payloads (422). */
  jobs?: readonly JobDefinition[];
  /** Periodic jobs (`definePeriodicJob`), enqueued once per tick by the cron drain; each names one of the job types. */
  schedules?: readonly PeriodicJob[];
  /** Serve the HTTP API under `/v1` and `/healthz` from `fetch`. Default true; false makes a drain-only Worker. */
  api?: boolean;
  /** The dashboard at `/` and the status pages at `/status/{id}`. Default true; needs the API. */
  dashboard?: boolean;
  /** The built-in `http` job (deliveries to HTTP_ALLOWED_HOSTS). Default true. */
  httpJob?: boolean;
  /**
   * Spans for the API's enqueues and the drains' attempts, through your
   * OpenTelemetry API and exporter: `openTelemetry(api)` (docs/operations.md#tracing). None when left out.
   */
  tracing?: Tracing;
}

/** The part of Workers' `ScheduledController` a drain uses. */
export interface ScheduledEvent {
  readonly cron: string;
}

/** A Worker: export it as the module's default (`export default createSkiplock({ ... })`). */
export interface Skiplock<Env extends SkiplockEnv = SkiplockEnv> {
  /** The HTTP API, dashboard and status pages; with `api: false`, 404 for every request. */
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response>;
  /**
   * The Cron Trigger: housekeeping and periodic jobs, then jobs until the
   * queue is empty or the budget ends. With SKIPLOCK_CLOCK bound, a tick with
   * nothing due runs no statement.
   */
  scheduled(event: ScheduledEvent, env: Env): Promise<void>;
  /**
   * Call after enqueueing from your own code (your own transaction, not the
   * HTTP API): starts the fast path and tells the queue clock, as the API's
   * enqueue does.
   */
  wake(env: Env, ctx: WaitUntil): void;
  /**
   * The helper drains' Durable Object class (fan-out), running these job
   * types: export it from your module (`export class SkiplockDrainer
   * extends skiplock.Drainer {}`) and bind it as SKIPLOCK_DRAINER.
   */
  readonly Drainer: SkiplockDrainerClass<Env>;
  /**
   * The Hono app behind `fetch` (API, and the pages unless `dashboard: false`),
   * to mount in your own: `app.route('/queue', skiplock.app)`.
   */
  readonly app: Hono<AppEnv>;
}

/** The demo types' names: a schedule may name them, since dev mode registers them. */
const DEMO_TYPES = ['noop', 'sleep', 'fail'];

/**
 * Makes a Worker from your job types and settings: `fetch` serves the HTTP
 * API, the dashboard and the status pages; `scheduled` drains. Settings left
 * out of `options` come from the Worker's variables and secrets. A mistake
 * in the job definitions (two types with one name, a schedule naming a type
 * that none defines) throws here, at start; a missing or unreadable setting
 * is logged as one line and answered 503 until it is fixed.
 */
export function createSkiplock<Env extends SkiplockEnv = SkiplockEnv>(options: SkiplockOptions = {}): Skiplock<Env> {
  const api = options.api ?? true;
  const dashboard = options.dashboard ?? true;
  checkDefinitions(options);

  const runtimes = new WeakMap<object, DrainRuntime>();
  /** Settings are read once per environment object (one per isolate on Workers). */
  const runtimeOf = (env: Bindings): DrainRuntime => {
    let runtime = runtimes.get(env);
    if (runtime === undefined) {
      const settings = resolveSettings(options, env as SkiplockEnv, { api });
      const builtIn = builtInJobs(settings.jobs).filter((job) => options.httpJob !== false || job.type !== 'http');
      const registry = createRegistry([...builtIn, ...(options.jobs ?? [])], options.schedules, {
        knownTypes: DEMO_TYPES,
      });
      runtime = {
        settings,
        registry,
        deliveries: workerDeliveries(env, settings.jobs.http),
        drainers: (env as SkiplockEnv).SKIPLOCK_DRAINER,
        tracing: options.tracing,
      };
      runtimes.set(env, runtime);
    }
    return runtime;
  };

  /** A database without skiplock's schema is logged once per isolate, as a setting it cannot read is. */
  const schemaMissingReported = new WeakSet<object>();
  const reportSchemaMissing = (env: Bindings) => (line: string) => {
    if (!schemaMissingReported.has(env)) console.error(line);
    schemaMissingReported.add(env);
  };

  /**
   * The request database holds nothing between statements (a fetch each over
   * Neon HTTP, a connection each over Hyperdrive), so one per environment
   * serves every request, rather than one made (its connection string parsed) per request.
   */
  const requestDbs = new WeakMap<object, Db>();
  const requestDbOf = (env: Bindings): Db => {
    let db = requestDbs.get(env);
    if (db === undefined) {
      db = requestDbAnsweringSchemaMissing(requestDatabase(runtimeOf(env).settings.database), reportSchemaMissing(env));
      requestDbs.set(env, db);
    }
    return db;
  };

  const deps: AppDeps = {
    settings: (env) => runtimeOf(env).settings.api,
    database: requestDbOf,
    sessionDatabase: (env) =>
      sessionDbAnsweringSchemaMissing(sessionDatabase(runtimeOf(env).settings.database), reportSchemaMissing(env)),
    onEnqueued: (ctx, env) => fastPathDrain(runtimeOf(env), ctx),
    onQueueChanged: (ctx, env) => lowerClock(env as SkiplockEnv, ctx),
    jobType: (env, type) => runtimeOf(env).registry.definitionOf(type),
    // Callbacks are deliveries of the built-in http job: without it, none.
    ...(options.httpJob === false
      ? {}
      : {
          callbackProblem: (env: Bindings, tenant: string, url: URL) =>
            destinationProblem(url, tenant, parseAllowedHosts(runtimeOf(env).settings.jobs.http.allowedHosts)),
        }),
    deliveryProblem: (env, delivery) => runtimeOf(env).deliveries.problemWith(delivery),
    tracing: options.tracing,
  };
  // Built on first use (a request, or `skiplock.app`), once per isolate: its routes and their OpenAPI entries cost startup CPU.
  let app: Hono<AppEnv> | undefined;
  const appOf = (): Hono<AppEnv> => {
    if (app === undefined) {
      app = createApp(deps);
      if (dashboard) app.route('/', uiRoutes(deps));
    }
    return app;
  };
  const reported = new WeakSet<object>();

  return {
    get app() {
      return appOf();
    },
    Drainer: drainerClass<Env>(runtimeOf),
    async fetch(request, env, ctx) {
      try {
        runtimeOf(env);
      } catch (error) {
        if (!(error instanceof ConfigurationError)) throw error;
        if (!reported.has(env)) console.error(error.message);
        reported.add(env);
        const problem = new ProblemError(
          503,
          'misconfigured',
          'Misconfigured',
          'this Worker is not configured: see its log',
        );
        return problemResponse(problem, crypto.randomUUID());
      }
      if (!api) return problemResponse(notFound('this Worker serves no HTTP API'), crypto.randomUUID());
      return appOf().fetch(request, env, ctx);
    },
    async scheduled(event, env) {
      let runtime: DrainRuntime;
      try {
        runtime = runtimeOf(env);
      } catch (error) {
        if (error instanceof ConfigurationError) console.error(error.message);
        throw error;
      }
      await scheduledDrain(runtime, event.cron, QueueClock.of(env));
    },
    wake(env, ctx) {
      fastPathDrain(runtimeOf(env), ctx);
      lowerClock(env, ctx);
    },
  };
}

/** Tells the queue clock (when bound) that the queue changed; a failure only delays the next drain to its recheck. */
function lowerClock(env: SkiplockEnv, ctx: WaitUntil): void {
  const clock = QueueClock.of(env);
  if (clock === undefined) return;
  const changedAt = Date.now();
  afterAnswer(ctx, () =>
    clock
      .lower(changedAt)
      .catch((error: unknown) => jsonConsoleLogger.error('could not tell the queue clock', errorFields(error))),
  );
}

/** The definitions' own mistakes, which no setting can fix: refused when the Worker starts. */
function checkDefinitions(options: SkiplockOptions): void {
  const jobs = options.jobs ?? [];
  const reserved = new Set(['http', ...DEMO_TYPES]);
  for (const job of jobs) {
    if (typeof job?.run !== 'function') {
      throw new TypeError(`skiplock: jobs must be defineJob(...) definitions; got ${JSON.stringify(job)}`);
    }
    if (reserved.has(job.type) && !(job.type === 'http' && options.httpJob === false)) {
      throw new Error(
        `skiplock: job type "${job.type}" is built in; pick another name${job.type === 'http' ? ' or pass httpJob: false' : ''}`,
      );
    }
  }
  createRegistry([...jobs], options.schedules, { knownTypes: [...reserved] });
}
