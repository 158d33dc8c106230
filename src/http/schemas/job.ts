import { z } from '@hono/zod-openapi';
import { JOB_STATUSES } from '../../engine/index.js';
import { JsonValueSchema, TimestampSchema, UuidSchema } from './common.js';

export const JobStatusSchema = z.enum(JOB_STATUSES).openapi('JobStatus');

/** A job as `skiplock.job_json()` builds it. */
export const JobSchema = z
  .object({
    id: UuidSchema,
    queue: z.string(),
    type: z.string(),
    tenant: z.string(),
    status: JobStatusSchema,
    priority: z.int(),
    payload: JsonValueSchema,
    attempts: z.int(),
    maxAttempts: z.int(),
    leaseSeconds: z.int(),
    runAt: TimestampSchema,
    expiresAt: TimestampSchema.nullable(),
    dedupKey: z.string().nullable(),
    createdAt: TimestampSchema,
    firstStartedAt: TimestampSchema.nullable(),
    startedAt: TimestampSchema.nullable(),
    finishedAt: TimestampSchema.nullable(),
    durationMs: z.int().nullable(),
    leaseExpiresAt: TimestampSchema.nullable(),
    workerId: z.string().nullable(),
    cancelRequested: z.boolean(),
    progress: JsonValueSchema,
    result: JsonValueSchema,
    lastError: JsonValueSchema,
    callbackUrl: z.string().nullable().describe('Where a success is announced (a signed Standard Webhooks POST).'),
    failureCallbackUrl: z.string().nullable().describe('Where a failure, cancellation or expiry is announced.'),
    runMs: z
      .int()
      .describe("How long its handler ran, summed over the attempts ended so far (durationMs is the last attempt's)."),
    tags: z.array(z.string()).describe('Its tags, given at enqueue and by its job definition; empty when none.'),
  })
  .openapi('Job');

/**
 * A job as its status token shows it (a statusUrl opened in a browser, no
 * API key): status, attempts and times, and only what its job definition
 * publishes of its progress and result. Never its payload, errors, tenant,
 * queue, worker or dedup key.
 */
export const JobStatusViewSchema = z
  .object({
    id: UuidSchema,
    status: JobStatusSchema,
    attempts: z.int(),
    maxAttempts: z.int(),
    createdAt: TimestampSchema,
    runAt: TimestampSchema,
    startedAt: TimestampSchema.nullable(),
    finishedAt: TimestampSchema.nullable(),
    progress: JsonValueSchema.describe(
      "What the job definition's publicProgress makes of its saved progress; by default `{ percent, message }` " +
        'from a percentage or an object holding them, else null.',
    ),
    result: JsonValueSchema.describe(
      "What the job definition's publicResult makes of its result; null unless it has one.",
    ),
    waitingFor: z
      .object({
        for: z.enum(['time', 'event', 'children', 'dependencies', 'turn']),
        until: TimestampSchema.nullable().describe(
          'When it resumes at the latest (a sleep, an event wait timing out).',
        ),
      })
      .nullable()
      .describe(
        "What a parked job (durable steps) or a held one (its key's turn) waits for: the kind and time only, never " +
          'the event name, key or job ids.',
      ),
  })
  .openapi('JobStatusView');

const StatusUrlSchema = z
  .url()
  .nullable()
  .describe(
    "This job's status view for a browser, without an API key: /v1/jobs/{id}?token=… (and /events, and the page " +
      '/status/{id}?token=…). Null when the Worker has no status-token secret.',
  );

/** What an enqueue did to the job a key matched. */
const EnqueueChangeFields = {
  debounced: z
    .boolean()
    .describe("True when a debounceKey matched: the job now has this request's payload and its start moved."),
  replaced: z
    .boolean()
    .describe("True when a dedupKey with dedupOnConflict replace matched: the job now has this request's payload."),
};

export const EnqueuedJobSchema = JobSchema.extend({
  statusUrl: StatusUrlSchema,
  deduplicated: z.boolean().describe('True when a dedup key or Idempotency-Key matched a job that already existed.'),
  ...EnqueueChangeFields,
}).openapi('EnqueuedJob');

/**
 * A job answered to a key without the `read` scope, by a route that changed
 * it (cancel, retry, reschedule): by id and status only, never its payload,
 * result or errors.
 */
export const JobReferenceSchema = z
  .object({ id: UuidSchema, status: JobStatusSchema })
  .describe('The job by id and status only: the key lacks the read scope, so it sees nothing else of the job.')
  .openapi('JobReference');

/** The whole job to a key that may read jobs; its reference to one that may not. */
export const ChangedJobSchema = z.union([JobSchema, JobReferenceSchema]);

/** A dedup hit answered to a key without the `read` scope: the job it matched, by id and status only. */
export const EnqueuedJobReferenceSchema = z
  .object({
    id: UuidSchema,
    status: JobStatusSchema,
    statusUrl: StatusUrlSchema,
    deduplicated: z.literal(true),
    ...EnqueueChangeFields,
  })
  .describe(
    'A dedup key or Idempotency-Key matched a job this request did not make, and the key lacks the read scope: ' +
      'that job by id and status only.',
  )
  .openapi('EnqueuedJobReference');

/** What an enqueue answers for each job. */
export const EnqueueAnswerSchema = z.union([EnqueuedJobSchema, EnqueuedJobReferenceSchema]);

/** A claimed job: without its tags, which a claim does not read. */
export const ClaimedJobSchema = JobSchema.omit({ tags: true })
  .extend({
    leaseToken: UuidSchema.describe('The fencing token: complete, fail, extend and release must present it.'),
  })
  .openapi('ClaimedJob');

export const JobPageSchema = z
  .object({
    jobs: z.array(JobSchema),
    nextCursor: z.string().nullable().describe('Pass as `cursor` for the next (older) page; null on the last page.'),
  })
  .openapi('JobPage');

export const JobIdParamsSchema = z.object({
  id: UuidSchema.openapi({ param: { name: 'id', in: 'path' } }),
});
