import { z } from '@hono/zod-openapi';
import { MAX_STATS_DAYS, TIMING_WINDOWS, type TimingWindow } from '../../engine/index.js';
import { queryNumberSchema } from './common.js';

const PercentilesSchema = z.object({ p50: z.int(), p95: z.int() }).openapi('Percentiles');

export const TimingWindowQuerySchema = z.object({
  window: z
    .enum(Object.keys(TIMING_WINDOWS) as [TimingWindow, ...TimingWindow[]])
    .default('1h')
    .describe('The attempts that ended in the last hour, day or week.'),
});

const attemptCounts = {
  queue: z.string(),
  tenant: z.string(),
  attempts: z.int().describe('Attempts that ended: succeeded, failed (retried or not), or cancelled while running.'),
  succeeded: z.int(),
  failed: z.int().describe('Attempts that failed or were cancelled while running.'),
};
const WAIT_DESCRIPTION =
  'From when the attempt was due (enqueued, run_at, or its retry time) until its handler started.';
const RUN_DESCRIPTION = "From the handler's start until the attempt ended.";

export const AttemptTimingsRowSchema = z
  .object({
    ...attemptCounts,
    waitMs: PercentilesSchema.describe(WAIT_DESCRIPTION),
    runMs: PercentilesSchema.describe(RUN_DESCRIPTION),
  })
  .openapi('AttemptTimingsRow');

export const AttemptTimingsSchema = z
  .object({
    window: TimingWindowQuerySchema.shape.window.removeDefault(),
    timings: z
      .array(AttemptTimingsRowSchema)
      .describe('One row per queue and tenant with an attempt that ended in the window.'),
  })
  .openapi('AttemptTimings');

export const DailyStatsQuerySchema = z.object({
  days: queryNumberSchema(1, MAX_STATS_DAYS, { integer: true })
    .default(30)
    .openapi({ type: 'integer', minimum: 1, maximum: MAX_STATS_DAYS, default: 30 })
    .describe('How many days to read, today (UTC) included.'),
});

const ESTIMATED = ' Read from log-scale histograms: within 9% of the exact figure.';

export const AttemptStatsRowSchema = z
  .object({
    ...attemptCounts,
    waitMs: PercentilesSchema.describe(WAIT_DESCRIPTION + ESTIMATED),
    runMs: PercentilesSchema.describe(RUN_DESCRIPTION + ESTIMATED),
  })
  .openapi('AttemptStatsRow');

export const DailyAttemptStatsSchema = z
  .object({
    days: z.int(),
    daily: z
      .array(AttemptStatsRowSchema.extend({ day: z.string().openapi({ format: 'date', example: '2026-05-01' }) }))
      .describe('One row per day (UTC), queue and tenant with an attempt that ended that day, newest day first.'),
    totals: z.array(AttemptStatsRowSchema).describe('One row per queue and tenant over all the days read.'),
  })
  .openapi('DailyAttemptStats');
