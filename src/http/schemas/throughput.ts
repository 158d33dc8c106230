import { z } from '@hono/zod-openapi';
import { TimestampSchema } from './common.js';

export const ThroughputRowSchema = z
  .object({
    queue: z.string(),
    minute: TimestampSchema.openapi({ description: "The minute's start." }),
    succeeded: z.int(),
    failed: z.int(),
  })
  .openapi('ThroughputRow');

export const ThroughputSchema = z
  .object({
    throughput: z.array(ThroughputRowSchema).openapi({
      description: 'One row per queue and minute of the last hour in which a job of the queue succeeded or failed.',
    }),
  })
  .openapi('Throughput');
