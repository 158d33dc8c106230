import { z } from '@hono/zod-openapi';
import { TIMING_WINDOWS, type TimingWindow } from '../../engine/index.js';

const PercentilesSchema = z.object({ p50: z.int(), p95: z.int() }).openapi('Percentiles');

export const TimingWindowQuerySchema = z.object({
  window: z
    .enum(Object.keys(TIMING_WINDOWS) as [TimingWindow, ...TimingWindow[]])
    .default('1h')
    .describe('The attempts that ended in the last hour, day or week.'),
});

export const AttemptTimingsRowSchema = z
  .object({
    queue: z.string(),
    tenant: z.string(),
    attempts: z.int().describe('Attempts that ended: succeeded, failed (retried or not), or cancelled while running.'),
    succeeded: z.int(),
    failed: z.int().describe('Attempts that failed or were cancelled while running.'),
    waitMs: PercentilesSchema.describe('From when the attempt was due (enqueued, run_at, or its retry time) until its handler started.'),
    runMs: PercentilesSchema.describe("From the handler's start until the attempt ended."),
  })
  .openapi('AttemptTimingsRow');

export const AttemptTimingsSchema = z
  .object({
    window: TimingWindowQuerySchema.shape.window.removeDefault(),
    timings: z.array(AttemptTimingsRowSchema).describe('One row per queue and tenant with an attempt that ended in the window.'),
  })
  .openapi('AttemptTimings');
