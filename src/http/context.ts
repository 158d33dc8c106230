import type { Tracing } from '../engine/tracing.js';
import type { Db, SessionDb } from '../db/types.js';
import type { JobType } from '../engine/job-type.js';
import type { DeliveryTarget } from '../engine/types.js';
import type { FailedAuthentications, RateLimiterBinding } from './auth/failed-authentications.js';
import type { PresentedApiKey } from './auth/presented-api-key.js';
import type { Principal } from './auth/principal.js';

/**
 * The host's bindings (a Worker's `env`, or whatever a Node host passes to
 * `app.fetch`). Opaque to the app: only the host's `AppDeps` read them.
 */
export type Bindings = object;

/** What the app needs from its host's configuration, read per request. */
export interface ApiSettings {
  /** The first admin API key (ADMIN_TOKEN); no admin key when undefined. */
  readonly adminToken: string | undefined;
  /** Signs status tokens (STATUS_TOKEN_SECRET); no statusUrl when undefined and not in dev mode. */
  readonly statusTokenSecret: string | undefined;
  /** Local development: a status-token secret derived from the admin token when none is set. */
  readonly devMode: boolean;
  /** Browser origins allowed to call the API (CORS). */
  readonly corsOrigins: readonly string[];
  /** Largest request body, in bytes. */
  readonly maxBodyBytes: number;
  /** One JSON line per request (LOG_LEVEL=info); errors are logged either way. */
  readonly logRequests: boolean;
  /** Counts failed authentications across the isolates of a location (AUTH_RATE_LIMITER); per isolate only without it. */
  readonly authRateLimiter?: RateLimiterBinding | undefined;
}

/** The smallest part of an execution context the app uses: Workers' `ctx`, or a Node host's stand-in. */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * What the app needs from its host, per request: Workers forbid sharing I/O
 * objects across requests, so each is made from the request's bindings.
 */
export interface AppDeps {
  settings(env: Bindings): ApiSettings;
  /** Single statements and batches (Neon HTTP on Workers): nothing to close. */
  database(env: Bindings): Db;
  /** An interactive transaction (Neon WebSocket on Workers); closed before the response ends. */
  sessionDatabase(env: Bindings): SessionDb;
  /**
   * Called after an enqueue created jobs (not when every job was a dedup hit):
   * the drain's fast path starts here with `ctx.waitUntil`.
   */
  onEnqueued?(ctx: WaitUntil, env: Bindings): void;
  /**
   * Called after every successful request that may change when jobs come
   * due (any POST, PATCH, PUT or DELETE under the API): the Worker tells its
   * queue clock, so a cron tick that follows drains.
   */
  onQueueChanged?(ctx: WaitUntil, env: Bindings): void;
  /** The job type of this name when the host knows it: its payload schema is checked at enqueue (422 naming the field). */
  jobType?(env: Bindings, type: string): JobType | undefined;
  /**
   * Why a completion callback of `tenant` to `url` could not be delivered
   * (the `http` job's destination rules), or undefined when it could.
   * Without it, the host delivers no callbacks and enqueue refuses them.
   */
  callbackProblem?(env: Bindings, tenant: string, url: URL): string | undefined;
  /**
   * Why the host's drains could not deliver a queue's jobs to `delivery`
   * (the field at fault, and why), or undefined when they could. Without
   * it, the host delivers no queues and `PUT /v1/queues/{queue}` refuses a target.
   */
  deliveryProblem?(env: Bindings, delivery: DeliveryTarget): { field: string; detail: string } | undefined;
  /** Enqueues run in a span (messaging `send`) whose context the jobs keep; without it they keep the request's `traceparent`. */
  tracing?: Tracing | undefined;
}

export interface AppEnv {
  Bindings: Bindings;
  Variables: {
    /** This request's id, echoed as `x-request-id` and in every log line and problem. */
    requestId: string;
    /** Who is calling; set by the `access` middleware of each protected route. */
    principal: Principal;
    /** An API key a route checks in its own statement, until it is settled (see `keyCheckedByStatement`). */
    presentedKey?: PresentedApiKey;
    /** This app's (so this isolate's) count of failed authentications per client. */
    failedAuthentications: FailedAuthentications;
  };
}
