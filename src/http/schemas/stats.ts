import { z } from '@hono/zod-openapi';
import { REAPED_WINDOW_SECONDS, type JobStatus } from '../../engine/index.js';
import { JobStatusSchema } from './job.js';
import {
  DeadLetterQueueSchema,
  PausedAtSchema,
  QueueDeliverySchema,
  QueueRateLimitSchema,
  RetentionSchema,
} from './queue.js';

const DEBOUNCED =
  'Of {of}, the jobs waiting out a debounce period: not started, their start still ahead, a later enqueue of ' +
  "their debounce key may move it. A held one is counted in held too, by its key's reason.";

const FINISHED_WINDOW =
  'Final statuses (succeeded, failed, cancelled, expired) count the jobs that finished in the last hour.';

export const HeldCountsSchema = z
  .object({
    concurrency: z.int().describe('Their concurrency key has no free slot.'),
    order: z.int().describe("Behind their ordering key's earlier jobs."),
    failedHead: z.int().describe('Their ordering key is held by a failed job (retry it, or unblock the key).'),
    rate: z.int().describe("Their rate key's window is full."),
  })
  .describe('The held jobs by why they wait.')
  .openapi('HeldCounts');

export const StatsRowSchema = z
  .object({
    queue: z.string(),
    tenant: z.string(),
    status: JobStatusSchema,
    count: z.int(),
    oldestWaitSeconds: z.number().nullable().describe('How long the oldest ready job has waited (queued only).'),
    held: z.int().describe("Of count, the jobs held for their key's turn."),
    heldBy: HeldCountsSchema,
    debounced: z.int().describe(DEBOUNCED.replace('{of}', 'count')),
  })
  .openapi('StatsRow');

const TableDeadTuplesSchema = z
  .object({
    table: z.string().describe('A table of the skiplock schema.'),
    deadTuples: z.int(),
    liveTuples: z.int(),
    lastVacuumAt: z.string().nullable().describe('When (auto)vacuum last finished on it, ISO-8601 UTC.'),
  })
  .openapi('TableDeadTuples');

export const QueueHealthSchema = z
  .object({
    oldestWaitingSeconds: z
      .number()
      .nullable()
      .describe('How long the oldest ready job has waited; null when none waits.'),
    expiredLeasesReaped: z
      .int()
      .describe(
        `Jobs whose lease ran out (worker died or hung) and were handed back, in the last ${REAPED_WINDOW_SECONDS} s.`,
      ),
    deadTuples: z
      .array(TableDeadTuplesSchema)
      .optional()
      .describe(
        'Dead row versions per queue table (pg_stat_user_tables); they pile up while vacuum is held back. ' +
          'Not for a tenant-bound key.',
      ),
    oldestSnapshotSeconds: z
      .number()
      .nullable()
      .optional()
      .describe(
        'Age of the oldest transaction in this database holding a snapshot, which keeps vacuum from removing dead rows; null when none (or not visible to this role). Not for a tenant-bound key.',
      ),
    oldestSnapshotPid: z
      .int()
      .nullable()
      .optional()
      .describe("That transaction's backend pid in pg_stat_activity. Not for a tenant-bound key."),
  })
  .openapi('QueueHealth');

export const StatsResponseSchema = z
  .object({
    stats: z.array(StatsRowSchema).describe(FINISHED_WINDOW),
    health: QueueHealthSchema.describe(
      "Signs of trouble before it bites; a tenant-bound key sees its own tenant's waits and reaped leases only, none of the database's figures.",
    ),
  })
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
    held: z.int().describe("Of the waiting jobs counted, those held for their key's turn."),
    heldBy: HeldCountsSchema,
    debounced: z.int().describe(DEBOUNCED.replace('{of}', 'the waiting jobs counted')),
    concurrency: z.int().nullable().describe("The queue's cap on running jobs over all tenants; null for none."),
    weight: z.int().describe("The queue's share of each tenant's turns."),
    delivery: QueueDeliverySchema,
    pausedAt: PausedAtSchema,
    retentionSeconds: RetentionSchema.nullable(),
    deadLetterQueue: DeadLetterQueueSchema.nullable(),
    rateLimit: QueueRateLimitSchema.nullable(),
  })
  .openapi('QueueSummary');

export const QueueListSchema = z.object({ queues: z.array(QueueSummarySchema) }).openapi('QueueList');
