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
  TagsSchema,
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
    dedupOnConflict: z
      .enum(['return', 'replace', 'refuse'])
      .optional()
      .describe(
        'When a job holds the dedupKey: return it (the default, 200 with deduplicated: true), replace its payload ' +
          '(and its run time, when runAt or delaySeconds is given) while it has not started (200 with replaced: ' +
          'true), or refuse (409 naming it). A job that has started cannot be replaced: 409, unless dedupScope is ' +
          'waiting.',
      ),
    dedupScope: z
      .enum(['waitingOrRunning', 'waiting'])
      .optional()
      .describe(
        'Which job holds the dedupKey: waitingOrRunning (the default) while it waits, runs and for its window ' +
          'after; waiting only until it starts, so a new job may wait while one runs.',
      ),
    debounceKey: KeyTextSchema.optional().describe(
      "While a job of the tenant and queue with this key has not started, an enqueue with the key replaces its payload and moves its start to debouncePeriodSeconds from now (never past its first enqueue plus debounceMaxDelaySeconds): 200 with debounced: true and that job. Once it has started, the next enqueue makes a new job. It is the job's dedup key: exclusive with dedupKey, orderingKey, runAt and delaySeconds.",
    ),
    debouncePeriodSeconds: intSchema(1, LIMITS.maxDelaySeconds)
      .optional()
      .describe("Seconds from the key's latest enqueue to the job's start; required with a debounceKey."),
    debounceMaxDelaySeconds: intSchema(1, LIMITS.maxDelaySeconds)
      .optional()
      .describe("The job starts at the latest this long after the burst's first enqueue; at least the period."),
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
    tags: TagsSchema.optional(),
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
  .refine((job) => job.dedupOnConflict === undefined || job.dedupKey !== undefined, {
    message: 'a dedupOnConflict needs a dedupKey',
    path: ['dedupOnConflict'],
  })
  .refine((job) => job.dedupScope === undefined || job.dedupKey !== undefined, {
    message: 'a dedupScope needs a dedupKey',
    path: ['dedupScope'],
  })
  .refine((job) => job.dedupScope !== 'waiting' || (job.dedupWindowSeconds ?? 0) === 0, {
    message: 'the waiting scope never counts an ended job: give no dedupWindowSeconds',
    path: ['dedupWindowSeconds'],
  })
  .refine((job) => (job.debounceKey === undefined) === (job.debouncePeriodSeconds === undefined), {
    message: 'a debounceKey and a debouncePeriodSeconds go together',
    path: ['debouncePeriodSeconds'],
  })
  .refine((job) => job.debounceMaxDelaySeconds === undefined || job.debounceKey !== undefined, {
    message: 'a debounceMaxDelaySeconds needs a debounceKey',
    path: ['debounceMaxDelaySeconds'],
  })
  .refine((job) => (job.debounceMaxDelaySeconds ?? Number.POSITIVE_INFINITY) >= (job.debouncePeriodSeconds ?? 0), {
    message: 'debounceMaxDelaySeconds must be at least debouncePeriodSeconds',
    path: ['debounceMaxDelaySeconds'],
  })
  .refine(
    (job) =>
      job.debounceKey === undefined ||
      [job.dedupKey, job.dedupWindowSeconds, job.dedupOnConflict, job.dedupScope].every((field) => field === undefined),
    { message: "a debounceKey is the job's dedup key: give no dedupKey or other dedup field", path: ['debounceKey'] },
  )
  .refine((job) => job.debounceKey === undefined || job.orderingKey === undefined, {
    message: 'give debounceKey or orderingKey, not both: debounce folds jobs into one, an ordering key runs each',
    path: ['debounceKey'],
  })
  .refine((job) => job.debounceKey === undefined || (job.runAt === undefined && job.delaySeconds === undefined), {
    message: 'the debounce period sets the start: give no runAt or delaySeconds with a debounceKey',
    path: ['debounceKey'],
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
