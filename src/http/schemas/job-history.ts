import { z } from '@hono/zod-openapi';
import type { JobEventKind } from '../../engine/index.js';
import { JsonValueSchema, TimestampSchema, UuidSchema } from './common.js';

const JOB_EVENT_KINDS = [
  'enqueued',
  'claimed',
  'lease_extended',
  'completed',
  'failed',
  'retried',
  'released',
  'cancel_requested',
  'cancelled',
  'expired',
  'lease_expired',
  'rescheduled',
  'callback_enqueued',
  'callback_failed',
  'callback_cancelled',
  'callback_delivered',
  'parked',
  'resumed',
  'held',
  'debounced',
  'replaced',
] as const satisfies readonly JobEventKind[];

export const JobEventSchema = z
  .object({
    id: z
      .int()
      .nullable()
      .describe("The stored event's id; null for what the job's own row records (enqueued, claimed, completed)."),
    jobId: UuidSchema,
    at: TimestampSchema,
    kind: z.enum(JOB_EVENT_KINDS),
    attempt: z.int(),
    workerId: z.string().nullable(),
    detail: JsonValueSchema,
  })
  .openapi('JobEvent');

export const JobHistorySchema = z.object({ events: z.array(JobEventSchema) }).openapi('JobHistory');
