import { z } from '@hono/zod-openapi';
import type { JobTypeRetention } from '../../engine/index.js';
import { NameSchema } from './common.js';
import { RetentionSchema } from './queue.js';

export const JobTypeParamsSchema = z.object({
  type: NameSchema.openapi({ param: { name: 'type', in: 'path' } }),
});

/** An operator's retention for a job type: it holds across deploys, whatever the type's definition says. */
export const JobTypeRetentionBodySchema = z
  .strictObject({
    retentionSeconds: RetentionSchema.nullable().describe(
      'How long the finished jobs of this type are kept, in seconds, or "none" (no history of its succeeded jobs; ' +
        "failed ones are kept for their queue's retention or the default). Null for none of its own: its queue's or the default.",
    ),
  })
  .openapi('JobTypeRetentionSettings');

export const JobTypeRetentionSchema = z
  .object({
    type: z.string(),
    retentionSeconds: RetentionSchema.nullable(),
    setBy: z
      .enum(['definition', 'operator'])
      .describe(
        '"definition": the drains that run the type write its definition\'s retention. "operator": set over the API, the ' +
          'CLI or SQL; the drains leave it until it is handed back (DELETE).',
      ),
    updatedAt: z.string(),
  })
  .openapi('JobTypeRetention') satisfies z.ZodType<JobTypeRetention>;

export const JobTypeRetentionListSchema = z
  .object({ jobTypes: z.array(JobTypeRetentionSchema) })
  .openapi('JobTypeRetentionList');
