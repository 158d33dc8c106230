import { z } from '@hono/zod-openapi';
import type { JobStatus } from '../../engine';
import { JobStatusSchema } from './job';

const FINISHED_WINDOW =
  'Final statuses (succeeded, failed, cancelled, expired) count the jobs that finished in the last hour.';

export const StatsRowSchema = z
  .object({
    queue: z.string(),
    tenant: z.string(),
    status: JobStatusSchema,
    count: z.int(),
    oldestWaitSeconds: z.number().nullable().describe('How long the oldest ready job has waited (queued only).'),
  })
  .openapi('StatsRow');

export const StatsResponseSchema = z
  .object({ stats: z.array(StatsRowSchema).describe(FINISHED_WINDOW) })
  .openapi('Stats');

const StatusCountsSchema = z.object({
  scheduled: z.int(),
  queued: z.int(),
  running: z.int(),
  retrying: z.int(),
  succeeded: z.int(),
  failed: z.int(),
  cancelled: z.int(),
  expired: z.int(),
} satisfies Record<JobStatus, z.ZodInt>);

export const QueueSummarySchema = z
  .object({
    queue: z.string(),
    counts: StatusCountsSchema.describe(FINISHED_WINDOW),
    oldestWaitSeconds: z.number().nullable().describe('How long the oldest ready job has waited.'),
  })
  .openapi('QueueSummary');

export const QueueListSchema = z.object({ queues: z.array(QueueSummarySchema) }).openapi('QueueList');
