import type { Db, SessionDb } from '../db/types.js';
import type { Env } from '../worker/env.js';
import type { Principal } from './auth/principal.js';

/**
 * What the app needs from its host, per request: Workers forbid sharing I/O
 * objects across requests, so each is made from the request's `env`.
 */
export interface AppDeps {
  /** Single statements and batches (Neon HTTP on Workers): nothing to close. */
  database(env: Env): Db;
  /** An interactive transaction (Neon WebSocket on Workers); closed before the response ends. */
  sessionDatabase(env: Env): SessionDb;
  /**
   * Called after an enqueue created jobs (not when every job was a dedup hit):
   * the drain's fast path starts here with `ctx.waitUntil`.
   */
  onEnqueued?(ctx: ExecutionContext, env: Env): void;
}

export interface AppEnv {
  Bindings: Env;
  Variables: {
    /** This request's id, echoed as `x-request-id` and in every log line and problem. */
    requestId: string;
    /** Who is calling; set by the `access` middleware of each protected route. */
    principal: Principal;
  };
}
