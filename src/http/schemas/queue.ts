import { z } from '@hono/zod-openapi';
import { intSchema } from './common.js';

/** PUT replaces every setting; one left out takes its default (no cap, weight 1). */
export const QueueSettingsBodySchema = z
  .strictObject({
    concurrency: intSchema(0, 100_000)
      .nullable()
      .default(null)
      .describe("Running jobs of the queue at once, over all tenants; null for no cap."),
    weight: intSchema(1, 1000).default(1).describe("Share of each tenant's turns when its queues compete."),
  })
  .openapi('QueueSettings');

export const QueueSchema = z
  .object({
    name: z.string(),
    concurrency: z.int().nullable(),
    weight: z.int(),
    custom: z.boolean().describe('False when the queue runs on the defaults.'),
    running: z.int().describe("Jobs of this queue running now (a tenant-bound key counts its own tenant's)."),
  })
  .openapi('Queue');
