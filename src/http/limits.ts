import { bodyLimit } from 'hono/body-limit';
import type { MiddlewareHandler } from 'hono';
import { MAX_ACKNOWLEDGEMENTS, MAX_BATCH, MAX_PAGE } from '../engine/index.js';
import type { AppDeps, AppEnv } from './context.js';
import { ProblemError } from './problem.js';

/** The limits of the HTTP API; each is checked before the database is asked. */
export const LIMITS = {
  /** One JSON value (a payload, result, error or progress), serialized. */
  maxJsonBytes: 256 * 1024,
  /** Nesting of one JSON value: deeper values are refused before anything walks them recursively. */
  maxJsonDepth: 64,
  maxBatch: MAX_BATCH,
  /** Jobs one acknowledgement (complete, fail, release) carries. */
  maxAcknowledgements: MAX_ACKNOWLEDGEMENTS,
  maxPage: MAX_PAGE,
  /** A list page ends once its jobs' JSON reaches this (at least one job comes), with a nextCursor for the rest. */
  maxPageBytes: 1024 * 1024,
  /** Jobs per claim request: with payloads of up to 256 KiB each, this bounds a response to 25 MiB. */
  maxClaim: 100,
  /** Longest `?wait=` of a long-poll. */
  maxWaitSeconds: 30,
  /** `?wait` long-polls of one job at once, per isolate. */
  maxWaitsPerJob: 10,
  /** Event streams of one job at once, per isolate. */
  maxStreamsPerJob: 10,
  /** Longest delay or time-to-live: ten years, far inside what Postgres intervals hold. */
  maxDelaySeconds: 10 * 365 * 24 * 60 * 60,
  /**
   * Batch statements of one bulk action request (500 jobs each): the request
   * answers a nextCursor past that, so it stays within a Worker's subrequests
   * and a client's timeout whatever the number of jobs.
   */
  maxBulkBatches: 20,
  /** Longest lease, as the database allows. */
  maxLeaseSeconds: 24 * 60 * 60,
} as const;

/** Refuses a body larger than the configured maximum with 413, counting the bytes of a chunked body as they arrive. */
export function limitBodySize(deps: AppDeps): MiddlewareHandler<AppEnv> {
  // One middleware per limit, built once rather than per request.
  const byMaxSize = new Map<number, MiddlewareHandler<AppEnv>>();
  return (c, next) => {
    const maxSize = deps.settings(c.env).maxBodyBytes;
    let handler = byMaxSize.get(maxSize);
    if (handler === undefined) {
      handler = bodyLimit({
        maxSize,
        onError: () => {
          const detail = `the request body is larger than ${maxSize} bytes`;
          throw new ProblemError(413, 'payload-too-large', 'Payload too large', detail);
        },
      });
      byMaxSize.set(maxSize, handler);
    }
    return handler(c, next);
  };
}
