import { z } from '@hono/zod-openapi';
import { MAX_CALLBACK_URL_LENGTH, MAX_RATE_LIMIT, MAX_RATE_PERIOD_SECONDS } from '../../engine/index.js';
import { LIMITS } from '../limits.js';
import {
  DateTimeInputSchema,
  DelaySecondsSchema,
  intSchema,
  JsonValueSchema,
  LeaseSecondsSchema,
  NameSchema,
} from './common.js';
import { EnqueueAnswerSchema } from './job.js';

/** The earliest runAt or expiresAt taken: before it, a time is a mistake (`0001-01-01` would be stored as it is). */
const EARLIEST_TIME = Date.UTC(2000, 0, 1);

/** A runAt or expiresAt: from 2000 to as far ahead as the longest delay (ten years). */
const ScheduleTimeSchema = DateTimeInputSchema.refine(
  (text) => {
    const at = Date.parse(text);
    return at >= EARLIEST_TIME && at <= Date.now() + LIMITS.maxDelaySeconds * 1000;
  },
  `must be from 2000-01-01 to ${LIMITS.maxDelaySeconds / (365 * 24 * 60 * 60)} years from now`,
);

export const RescheduleBodySchema = z
  .strictObject({
    priority: intSchema(-1000, 1000).optional().describe('Higher runs first.'),
    runAt: ScheduleTimeSchema.optional().describe(
      'Not before this time; a past time means now. Exclusive with delaySeconds.',
    ),
    delaySeconds: DelaySecondsSchema.optional().describe('Not sooner than this many seconds from now.'),
  })
  .refine((change) => change.runAt === undefined || change.delaySeconds === undefined, {
    message: 'give runAt or delaySeconds, not both',
    path: ['delaySeconds'],
  })
  .refine((change) => Object.values(change).some((value) => value !== undefined), {
    message: 'give priority, runAt or delaySeconds',
  })
  .openapi('RescheduleRequest');

const CallbackUrlSchema = z.url({ protocol: /^https?$/ }).max(MAX_CALLBACK_URL_LENGTH);

/** Dedup keys beginning with this are the API's own (Idempotency-Key); clients cannot forge them. */
export const IDEMPOTENCY_DEDUP_PREFIX = 'idempotency-key:';

/** A key as the jobs table stores one: no NUL (Postgres text cannot hold it), no unpaired surrogates. */
const KeyTextSchema = z
  .string()
  .min(1)
  .max(256)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what it refuses
  .regex(/^[^\u0000\p{Cs}]+$/u, 'must not contain \\u0000 or unpaired surrogates');

export const EnqueueBodySchema = z
  .strictObject({
    type: NameSchema.optional().describe('Handler name; defaults to the queue.'),
    payload: JsonValueSchema.optional(),
    tenant: NameSchema.optional().describe("Defaults to 'default'; a tenant-bound key's own tenant."),
    priority: intSchema(-1000, 1000).optional().describe('Higher runs first; default 0.'),
    runAt: ScheduleTimeSchema.optional().describe(
      'Not before this time (from 2000 to ten years ahead). Exclusive with delaySeconds.',
    ),
    delaySeconds: DelaySecondsSchema.optional(),
    maxAttempts: intSchema(1, 1000).optional().describe('Default 5.'),
    leaseSeconds: LeaseSecondsSchema.optional().describe('The per-attempt timeout; default 60.'),
    expiresAt: ScheduleTimeSchema.optional().describe(
      'Expire, never run, if not started by then (from 2000 to ten years ahead). Exclusive with ttlSeconds.',
    ),
    ttlSeconds: DelaySecondsSchema.optional(),
    dedupKey: KeyTextSchema.refine(
      (key) => !key.startsWith(IDEMPOTENCY_DEDUP_PREFIX),
      `must not begin with ${IDEMPOTENCY_DEDUP_PREFIX}`,
    )
      .optional()
      .describe(
        'A job of the same queue with this key that is not finished (or finished within its window) ' +
          'is returned instead.',
      ),
    dedupWindowSeconds: intSchema(0, LIMITS.maxDelaySeconds)
      .optional()
      .describe('How long after finishing the key still matches; default 0.'),
    // At least a millisecond: the column is a `real`, which cannot hold tinier fractions.
    backoffBaseSeconds: z.number().min(0.001).max(86_400).optional().describe('First retry delay scale; default 1.'),
    backoffMaxSeconds: z
      .number()
      .min(0.001)
      .max(30 * 86_400)
      .optional()
      .describe('Longest retry delay; default 3600.'),
    callbackUrl: CallbackUrlSchema.optional().describe(
      'Announce a success here: a POST in the Standard Webhooks format ({type: "job.succeeded", timestamp, data: the ' +
        "job without its payload}), signed with the endpoint's secret and retried with backoff. The host must be on " +
        "HTTP_ALLOWED_HOSTS for the job's tenant; private addresses are refused.",
    ),
    failureCallbackUrl: CallbackUrlSchema.optional().describe(
      'Announce a failure, cancellation or expiry here (type job.failed, job.cancelled or job.expired), as callbackUrl does a success.',
    ),
    concurrencyKey: KeyTextSchema.optional().describe(
      "At most concurrencyLimit of the tenant's jobs with this key are past their turn (waiting to start, running, " +
        'retrying or parked) at once; the others wait, held, and take the slots that free in enqueue order. ' +
        'Exclusive with orderingKey.',
    ),
    concurrencyLimit: intSchema(1, 1000)
      .optional()
      .describe("The key's slots; default 1. The latest job's number is the key's."),
    orderingKey: KeyTextSchema.optional().describe(
      "The tenant's jobs with this key run one at a time, in enqueue order; a retrying job keeps the others waiting.",
    ),
    orderingOnFailure: z
      .enum(['hold', 'continue'])
      .optional()
      .describe(
        "When the key's head fails for good or expires: hold (the default) keeps the others waiting until the head " +
          'is retried or the key unblocked; continue lets the next one run.',
      ),
    rateKey: KeyTextSchema.optional().describe(
      "At most rateLimit of the tenant's jobs with this key start in any ratePeriodSeconds, every attempt counted, " +
        'however many workers claim at once. Exclusive with concurrencyKey and orderingKey.',
    ),
    rateLimit: intSchema(1, MAX_RATE_LIMIT)
      .optional()
      .describe("Starts per period; required with a rateKey. The latest job's numbers are the key's."),
    ratePeriodSeconds: intSchema(1, MAX_RATE_PERIOD_SECONDS)
      .optional()
      .describe('The period in seconds; required with a rateKey.'),
    rateOnExcess: z
      .enum(['throttle', 'drop'])
      .optional()
      .describe(
        'A job beyond the limit: throttle (the default) holds it until the window has room; drop ends it ' +
          'cancelled at enqueue, its lastError saying why.',
      ),
  })
  .refine((job) => job.runAt === undefined || job.delaySeconds === undefined, {
    message: 'give runAt or delaySeconds, not both',
    path: ['delaySeconds'],
  })
  .refine((job) => job.expiresAt === undefined || job.ttlSeconds === undefined, {
    message: 'give expiresAt or ttlSeconds, not both',
    path: ['ttlSeconds'],
  })
  .refine((job) => job.concurrencyKey === undefined || job.orderingKey === undefined, {
    message: 'give concurrencyKey or orderingKey, not both: an ordering key is a key of one slot',
    path: ['orderingKey'],
  })
  .refine((job) => job.concurrencyLimit === undefined || job.concurrencyKey !== undefined, {
    message: 'a concurrencyLimit needs a concurrencyKey',
    path: ['concurrencyLimit'],
  })
  .refine((job) => job.orderingOnFailure === undefined || job.orderingKey !== undefined, {
    message: 'an orderingOnFailure needs an orderingKey',
    path: ['orderingOnFailure'],
  })
  .refine((job) => job.rateKey === undefined || (job.concurrencyKey === undefined && job.orderingKey === undefined), {
    message: 'a rateKey cannot be given with a concurrencyKey or an orderingKey: a job names one key',
    path: ['rateKey'],
  })
  .refine(
    (job) =>
      job.rateKey === undefined
        ? job.rateLimit === undefined && job.ratePeriodSeconds === undefined
        : job.rateLimit !== undefined && job.ratePeriodSeconds !== undefined,
    { message: 'a rateKey needs rateLimit and ratePeriodSeconds, and they need a rateKey', path: ['rateLimit'] },
  )
  .refine((job) => job.rateOnExcess === undefined || job.rateKey !== undefined, {
    message: 'a rateOnExcess needs a rateKey',
    path: ['rateOnExcess'],
  })
  .openapi('EnqueueRequest');

export type EnqueueBody = z.output<typeof EnqueueBodySchema>;

export const EnqueueBatchBodySchema = z
  .strictObject({ jobs: z.array(EnqueueBodySchema).min(1).max(LIMITS.maxBatch) })
  .openapi('EnqueueBatchRequest');

export const EnqueueBatchResponseSchema = z
  .object({ jobs: z.array(EnqueueAnswerSchema) })
  .openapi('EnqueueBatchResponse');

export const QueueParamsSchema = z.object({
  queue: NameSchema.openapi({ param: { name: 'queue', in: 'path' } }),
});

export const IdempotencyHeadersSchema = z.object({
  'idempotency-key': z
    .string()
    .regex(/^[\x21-\x7e]{1,255}$/, 'must be 1 to 255 printable ASCII characters')
    .optional()
    .describe('A retried request with the same key (within 24 h) returns the job the first one made.'),
});
