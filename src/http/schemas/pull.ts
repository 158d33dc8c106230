import { z } from '@hono/zod-openapi';
import { DRAIN_WORKER_ID_PREFIX } from '../../engine/worker-id.js';
import { LIMITS } from '../limits.js';
import {
  DelaySecondsSchema,
  intSchema,
  JsonValueSchema,
  LeaseSecondsSchema,
  NameSchema,
  TimestampSchema,
  UuidSchema,
} from './common.js';
import { ClaimedJobSchema, JobSchema } from './job.js';

/** A pull worker's id: any name but those of skiplock's own drains. */
export const WorkerIdSchema = NameSchema.refine(
  (id) => !id.startsWith(DRAIN_WORKER_ID_PREFIX),
  `must not begin with ${DRAIN_WORKER_ID_PREFIX}, which skiplock's own drains use`,
);

export const ClaimBodySchema = z
  .strictObject({
    max: intSchema(1, LIMITS.maxClaim)
      .default(1)
      .describe(`Jobs to claim at most, 1 to ${LIMITS.maxClaim}; default 1.`),
    leaseSeconds: LeaseSecondsSchema.optional().describe("Lease length; each job's own leaseSeconds when left out."),
    workerId: WorkerIdSchema.describe(
      'Recorded on the job and its events; a key bound to a worker id claims under that id only.',
    ),
    types: z.array(NameSchema).max(100).optional().describe('The job types this worker can run; all when left out.'),
    traceContext: z
      .boolean()
      .optional()
      .describe(
        "Also answer each job's traceContext (its W3C traceparent and tracestate, kept from its enqueue), " +
          'for a worker that continues the trace; default false.',
      ),
  })
  .openapi('ClaimRequest');

export const ClaimResponseSchema = z.object({ jobs: z.array(ClaimedJobSchema) }).openapi('ClaimResponse');

const leaseToken = UuidSchema.describe('The token the claim handed out with the job.');

const completeFields = { leaseToken, result: JsonValueSchema.optional() };

const failFields = {
  leaseToken,
  error: JsonValueSchema.optional().describe("What went wrong; stored as the job's lastError."),
  retryInSeconds: DelaySecondsSchema.optional().describe("Retry after exactly this long instead of the job's backoff."),
  forGood: z.boolean().optional().describe('No retry: the job fails now whatever attempts are left.'),
};

const noDelayForGood: [
  (failure: { forGood?: boolean | undefined; retryInSeconds?: number | undefined }) => boolean,
  { message: string; path: string[] },
] = [
  (failure) => !(failure.forGood === true && failure.retryInSeconds !== undefined),
  { message: 'a failure for good has no retry delay', path: ['retryInSeconds'] },
];

const releaseFields = {
  leaseToken,
  delaySeconds: DelaySecondsSchema.optional().describe('Back in the queue after this delay; at once when left out.'),
  countAttempt: z.boolean().optional().describe('Whether this attempt counts; default false.'),
};

export const CompleteBodySchema = z.strictObject(completeFields).openapi('CompleteRequest');

export const FailBodySchema = z
  .strictObject(failFields)
  .refine(...noDelayForGood)
  .openapi('FailRequest');

export const ExtendBodySchema = z
  .strictObject({
    leaseToken,
    leaseSeconds: LeaseSecondsSchema.optional().describe(
      "New lease length from now; the job's leaseSeconds when left out.",
    ),
    progress: JsonValueSchema.optional().describe('Saved with the heartbeat, so the job can resume from it.'),
  })
  .openapi('ExtendRequest');

export const ExtendResponseSchema = z
  .object({
    leaseExpiresAt: TimestampSchema,
    cancelRequested: z.boolean().describe('The job was cancelled while running: stop working on it.'),
  })
  .openapi('ExtendResponse');

export const ReleaseBodySchema = z.strictObject(releaseFields).openapi('ReleaseRequest');

const jobId = UuidSchema.describe('The claimed job.');

export const AcknowledgeBodySchema = z
  .strictObject({
    complete: z
      .array(z.strictObject({ id: jobId, ...completeFields }))
      .optional()
      .describe('Jobs that succeeded.'),
    fail: z
      .array(z.strictObject({ id: jobId, ...failFields }).refine(...noDelayForGood))
      .optional()
      .describe('Attempts that failed.'),
    release: z
      .array(z.strictObject({ id: jobId, ...releaseFields }))
      .optional()
      .describe('Jobs handed back.'),
  })
  .refine(
    (body) => {
      const total = (body.complete?.length ?? 0) + (body.fail?.length ?? 0) + (body.release?.length ?? 0);
      return total >= 1 && total <= LIMITS.maxAcknowledgements;
    },
    { message: `acknowledge 1 to ${LIMITS.maxAcknowledgements} jobs in one request`, path: ['complete'] },
  )
  .openapi('AcknowledgeRequest');

export const AcknowledgeResponseSchema = z
  .object({
    completed: z.array(UuidSchema).describe('Jobs completed.'),
    failed: z
      .array(z.object({ id: UuidSchema, outcome: z.enum(['retrying', 'failed', 'cancelled']) }))
      .describe('Jobs whose attempt failed, and how each was left.'),
    released: z.array(UuidSchema).describe('Jobs handed back (or ended cancelled, when a cancel was asked for).'),
    stale: z.array(UuidSchema).describe('Jobs whose lease token no longer holds them: nothing changed for these.'),
  })
  .openapi('AcknowledgeResponse');

export const WorkerParamsSchema = z.object({
  workerId: WorkerIdSchema.openapi({ param: { name: 'workerId', in: 'path' } }).describe(
    'The workerId its claims gave.',
  ),
});

export const ReleasedJobsSchema = z.object({ jobs: z.array(JobSchema) }).openapi('ReleasedJobs');
