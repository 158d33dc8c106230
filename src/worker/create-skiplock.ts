import type { ExecutionContext, Hono } from 'hono';
import type { Db } from '../db/types.js';
import type { JobDefinition } from '../drain/define-job.js';
import type { PeriodicJob } from '../drain/periodic.js';
import { createRegistry } from '../drain/registry.js';
import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { AppDeps, AppEnv, Bindings, WaitUntil } from '../http/context.js';
import { notFound, ProblemError, problemResponse } from '../http/problem.js';
import { afterAnswer } from './after-answer.js';
import { requestDatabase, sessionDatabase } from './database.js';
import type { DrainRuntime } from './drain.js';
import type { Tracing } from '../engine/tracing.js';
import { drainerClass, type SkiplockDrainerClass } from './drainer.js';
import { forwardingApp } from './forwarding-app.js';
import type { SkiplockEnv } from './env.js';
import { QueueClock } from './queue-clock.js';
import { requestDbAnsweringSchemaMissing, sessionDbAnsweringSchemaMissing } from './schema-missing.js';
import { ConfigurationError } from './configuration-error.js';
import type { SkiplockSettings } from './settings.js';

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
   * to mount in your own: `app.route('/queue', skiplock.app)`. It hands each
   * request to the API's app, whose modules load with the first request; a
   * path the API has no route for goes on to your app's own routes.
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

  // The settings, job types and drains load with the first request, cron tick or helper drain, each of which
  // awaits `loadRuntime` before anything reads `runtimeOf`: zod among them, they cost startup CPU.
  let runtimeModule: RuntimeModule | undefined;
  const loadRuntime = async (): Promise<RuntimeModule> => {
    runtimeModule ??= await import('./runtime.js');
    return runtimeModule;
  };
  const loaded = (): RuntimeModule => {
    if (runtimeModule === undefined) throw new Error('skiplock: the Worker runtime was used before it was loaded');
    return runtimeModule;
  };

  const runtimes = new WeakMap<object, DrainRuntime>();
  /** Settings are read once per environment object (one per isolate on Workers). */
  const runtimeOf = (env: Bindings): DrainRuntime => {
    let runtime = runtimes.get(env);
    if (runtime === undefined) {
      runtime = loaded().workerRuntime(options, env as SkiplockEnv, api, DEMO_TYPES);
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
    onEnqueued: (ctx, env) => loaded().fastPathDrain(runtimeOf(env), ctx),
    onQueueChanged: (ctx, env) => lowerClock(env as SkiplockEnv, ctx),
    jobType: (env, type) => runtimeOf(env).registry.definitionOf(type),
    // Callbacks are deliveries of the built-in http job: without it, none.
    ...(options.httpJob === false
      ? {}
      : {
          callbackProblem: (env: Bindings, tenant: string, url: URL) => {
            const { destinationProblem, parseAllowedHosts } = loaded();
            return destinationProblem(url, tenant, parseAllowedHosts(runtimeOf(env).settings.jobs.http.allowedHosts));
          },
        }),
    deliveryProblem: (env, delivery) => runtimeOf(env).deliveries.problemWith(delivery),
    tracing: options.tracing,
  };
  // Loaded and built on the first request, once per isolate: its modules (every route with its schemas and
  // OpenAPI entry) are evaluated then rather than when the Worker starts.
  let app: Promise<Hono<AppEnv>> | undefined;
  let builtApp: Hono<AppEnv> | undefined;
  const loadApp = async (): Promise<Hono<AppEnv>> => {
    await loadRuntime();
    app ??= httpApp(deps, dashboard).then(
      (built) => {
        builtApp = built;
        return built;
      },
      (error: unknown) => {
        // Tried again by the next request rather than failing every one after it.
        app = undefined;
        throw error;
      },
    );
    return app;
  };
  let mountable: Hono<AppEnv> | undefined;
  const reported = new WeakSet<object>();

  return {
    get app() {
      mountable ??= forwardingApp(loadApp);
      return mountable;
    },
    Drainer: drainerClass<Env>(async (env) => {
      const { helperDrain } = await loadRuntime();
      return { runtime: runtimeOf(env), helperDrain };
    }),
    async fetch(request, env, ctx) {
      // Once loaded, a request awaits nothing more than it did when the app was built at startup.
      if (runtimeModule === undefined) await loadRuntime();
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
      return (builtApp ?? (await loadApp())).fetch(request, env, ctx);
    },
    async scheduled(event, env) {
      const { scheduledDrain } = await loadRuntime();
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
      // Called from the host's own code, perhaps before skiplock served anything in this isolate.
      if (runtimeModule === undefined)
        ctx.waitUntil(
          loadRuntime()
            .then(({ fastPathDrain }) => fastPathDrain(runtimeOf(env), ctx))
            .catch((error: unknown) => jsonConsoleLogger.error('fast-path drain not started', errorFields(error))),
        );
      else runtimeModule.fastPathDrain(runtimeOf(env), ctx);
      lowerClock(env, ctx);
    },
  };
}

type RuntimeModule = typeof import('./runtime.js');

/** The API (and the pages, with the dashboard), its modules imported on first use. */
async function httpApp(deps: AppDeps, dashboard: boolean): Promise<Hono<AppEnv>> {
  const [{ createApp }, ui] = await Promise.all([
    import('../http/app.js'),
    dashboard ? import('../ui/index.js') : undefined,
  ]);
  const app = createApp(deps);
  if (ui !== undefined) app.route('/', ui.uiRoutes(deps));
  return app;
}

/** Tells the queue clock (when bound) that the queue changed; a failure only delays the next drain to its recheck. */
function lowerClock(env: SkiplockEnv, ctx: WaitUntil): void {
  const clock = QueueClock.of(env);
  if (clock === undefined) return;
  const changedAt = Date.now();
  afterAnswer(ctx, () =>
    clock.lowerCoalesced(changedAt, (error: unknown) =>
      jsonConsoleLogger.error('could not tell the queue clock', errorFields(error)),
    ),
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
