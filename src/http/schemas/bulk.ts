import { z } from '@hono/zod-openapi';
import { MAX_BULK_IDS, MAX_BULK_LIMIT } from '../../engine/index.js';
import { DateTimeInputSchema, intSchema, NameSchema, PayloadMatchSchema, TagsSchema, UuidSchema } from './common.js';
import { RescheduleBodySchema } from './enqueue.js';
import { JobStatusSchema } from './job.js';

export const BulkFilterSchema = z
  .strictObject({
    queue: NameSchema.optional(),
    tenant: NameSchema.optional().describe("A tenant-bound key's own tenant is always the filter's."),
    type: NameSchema.optional(),
    status: z
      .union([JobStatusSchema, z.array(JobStatusSchema).min(1).max(8)])
      .optional()
      .describe('One status or a list: jobs in any of them.'),
    createdAfter: DateTimeInputSchema.optional().describe('Created at or after this time.'),
    createdBefore: DateTimeInputSchema.optional().describe('Created before this time.'),
    finishedAfter: DateTimeInputSchema.optional().describe('Finished at or after this time (finished jobs only).'),
    finishedBefore: DateTimeInputSchema.optional().describe('Finished before this time (finished jobs only).'),
    ids: z
      .array(UuidSchema)
      .min(1)
      .max(MAX_BULK_IDS)
      .optional()
      .describe(`These jobs only, at most ${MAX_BULK_IDS}: what a dashboard selected.`),
    tags: TagsSchema.min(1).optional().describe('Jobs carrying every one of these tags.'),
    payload: PayloadMatchSchema.optional(),
  })
  .describe('Every field narrows; an empty filter needs `all: true`.')
  .openapi('BulkFilter');

const commonFields = {
  filter: BulkFilterSchema.optional(),
  all: z
    .boolean()
    .optional()
    .describe('Say true to act on every job (of your tenant, for a tenant-bound key) with an empty filter.'),
  dryRun: z.boolean().optional().describe('Count the jobs the action would take, by status; change nothing.'),
  limit: intSchema(1, MAX_BULK_LIMIT).optional().describe('At most this many jobs, oldest first.'),
  cursor: z.string().min(1).max(128).optional().describe('The nextCursor of the previous answer: carry on from there.'),
};

export const BulkActionBodySchema = z
  .discriminatedUnion('action', [
    z.strictObject({ action: z.literal('retry'), ...commonFields }),
    z.strictObject({ action: z.literal('cancel'), ...commonFields }),
    z.strictObject({ action: z.literal('reschedule'), ...commonFields, change: RescheduleBodySchema }),
    z.strictObject({ action: z.literal('delete'), ...commonFields }),
    z.strictObject({
      action: z.literal('redrive'),
      ...commonFields,
      toQueue: NameSchema.optional().describe('Move the jobs into this queue; they keep theirs when left out.'),
    }),
  ])
  .openapi('BulkActionRequest');

export const BulkActionResultSchema = z
  .object({
    action: z.enum(['retry', 'cancel', 'reschedule', 'delete', 'redrive']),
    dryRun: z.boolean(),
    matched: z
      .int()
      .describe('Jobs that match the filter in a state the action acts on: those it took (a dry run: all, by status).'),
    changed: z.int().describe('Of those, the jobs changed (0 in a dry run).'),
    cancelRequested: z
      .int()
      .optional()
      .describe('cancel: of changed, the running jobs asked to stop at their next heartbeat.'),
    byStatus: z.partialRecord(JobStatusSchema, z.int()).optional().describe('A dry run: the matched jobs by status.'),
    batches: z.int().describe('Batch statements run, each its own transaction.'),
    nextCursor: z
      .string()
      .nullable()
      .describe('Set when this request stopped before the end: send the same request with this cursor to carry on.'),
  })
  .openapi('BulkActionResult');
