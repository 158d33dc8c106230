import { z } from '@hono/zod-openapi';
import { MAX_EVENT_KEEP_SECONDS } from '../../engine/index.js';
import { LIMITS } from '../limits.js';
import { intSchema, JsonValueSchema, LeaseSecondsSchema, NameSchema, TimestampSchema, UuidSchema } from './common.js';
import { JobStatusSchema } from './job.js';

const StepNameSchema = z.string().min(1).max(200);

export const JobStepsSchema = z
  .object({
    steps: z
      .array(
        z.object({
          name: StepNameSchema,
          kind: z.enum(['do', 'sleep', 'event', 'invoke']),
          status: z.enum(['done', 'retrying']).describe('retrying: a `do` step that failed and waits for its retry'),
          result: JsonValueSchema.describe(
            "A `do` step's result; a sleep's `{ until }`; an event's `{ payload, sentAt }` (null: timed out); a child's end.",
          ),
          failedAttempts: z.int(),
          lastError: JsonValueSchema,
          attempt: z
            .int()
            .nullable()
            .describe("The job's attempt that recorded it (null: an event or a child's end did)."),
          recordedAt: TimestampSchema,
        }),
      )
      .describe('In the order they were recorded.'),
    waitingFor: z
      .array(
        z.union([
          z.object({ kind: z.literal('sleep'), step: StepNameSchema, until: TimestampSchema }),
          z.object({
            kind: z.literal('event'),
            step: StepNameSchema,
            event: z.string(),
            key: z.string().nullable(),
            timeoutAt: TimestampSchema,
          }),
          z.object({ kind: z.literal('child'), step: StepNameSchema, jobId: UuidSchema }),
          z.object({ kind: z.literal('dependency'), jobId: UuidSchema }),
          z.object({
            kind: z.literal('key'),
            key: z.string(),
            ordered: z.boolean(),
            blockedBy: UuidSchema.nullable().describe('The failed head that holds an ordering key, if one does.'),
          }),
          z.object({
            kind: z.literal('debounce'),
            key: z.string(),
            until: TimestampSchema.describe('Its start, unless another enqueue of the key moves it.'),
            enqueues: z.int().describe('The enqueues of its key that this job took, its first included.'),
          }),
        ]),
      )
      .describe(
        "What the parked job waits for now, the held job (its key's turn), or the debounced job (more enqueues of " +
          'its key until its start).',
      ),
    links: z
      .array(
        z.object({
          kind: z.enum(['child', 'dependency', 'dependent', 'parent']),
          jobId: UuidSchema,
          type: z.string().nullable(),
          status: JobStatusSchema.nullable(),
          step: StepNameSchema.nullable(),
          resolvedAt: TimestampSchema.nullable(),
        }),
      )
      .describe('Children it invoked, its parent, the jobs of its flow it depends on and those that depend on it.'),
  })
  .openapi('JobSteps');

const EventNameSchema = z.string().min(1).max(200).describe('The name jobs wait for, e.g. `order.paid`.');

export const SendEventBodySchema = z
  .strictObject({
    event: EventNameSchema,
    key: z.string().min(1).max(200).optional().describe('Wakes waits for this key, and waits without a key.'),
    payload: JsonValueSchema.optional(),
    tenant: NameSchema.optional().describe("Defaults to 'default'; a tenant-bound key's own tenant."),
    keepSeconds: intSchema(0, MAX_EVENT_KEEP_SECONDS)
      .optional()
      .describe(
        'How long the event is kept for jobs that reach their wait later (the last of each name and key); ' +
          'default 86400, 0 keeps nothing.',
      ),
  })
  .openapi('SendEventRequest');

export const SentEventSchema = z
  .object({
    event: z.string(),
    key: z.string().nullable(),
    tenant: z.string(),
    sentAt: TimestampSchema,
    woken: z.int().describe('Jobs that waited for it and resume now.'),
  })
  .openapi('SentEvent');

const RefSchema = z.string().min(1).max(128);

export const FlowBodySchema = z
  .strictObject({
    tenant: NameSchema.optional().describe(
      "Every job's tenant. Defaults to 'default'; a tenant-bound key's own tenant.",
    ),
    jobs: z
      .array(
        z.strictObject({
          ref: RefSchema.describe("The job's name in the flow, as other jobs' dependsOn name it."),
          queue: NameSchema,
          type: NameSchema.optional().describe('Handler name; defaults to the queue.'),
          payload: JsonValueSchema.optional(),
          priority: intSchema(-1000, 1000).optional(),
          maxAttempts: intSchema(1, 1000).optional(),
          leaseSeconds: LeaseSecondsSchema.optional(),
          dependsOn: z
            .array(
              z.union([
                RefSchema,
                z.strictObject({
                  ref: RefSchema,
                  onFailure: z
                    .enum(['fail', 'run'])
                    .optional()
                    .describe('When this dependency fails: fail the job (default) or run it anyway.'),
                }),
              ]),
            )
            .max(LIMITS.maxBatch)
            .optional()
            .describe('The jobs of the flow it waits for: it runs once all have ended.'),
        }),
      )
      .min(1)
      .max(LIMITS.maxBatch),
  })
  .openapi('FlowRequest');

export const FlowResponseSchema = z
  .object({
    jobs: z.array(z.object({ ref: z.string(), id: UuidSchema, status: JobStatusSchema, runAt: TimestampSchema })),
  })
  .openapi('FlowResponse');
