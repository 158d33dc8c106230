import { z } from '@hono/zod-openapi';
import { MAX_QUEUE_RATE_LIMIT, MAX_QUEUE_RATE_SECONDS } from '../../engine/index.js';
import { DELIVERY_QUEUE_PREFIX, DELIVERY_SECRET_PREFIX, type DeliveryTarget } from '../../engine/types.js';
import { intSchema, NameSchema } from './common.js';

/** A Worker secret's or binding's name that starts with `prefix`: the ones named for the API to reach. */
const reachableName = (prefix: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}[A-Za-z0-9_]{1,100}$`), `a name starting with ${prefix}, then letters, digits and _`);

export const DeliveryTargetSchema = z
  .discriminatedUnion('target', [
    z
      .strictObject({
        target: z.literal('webhook'),
        url: z
          .url({ protocol: /^https?$/ })
          .max(2048)
          .refine(
            (url) => new URL(url).username === '' && new URL(url).password === '',
            'no user or password in the URL: sign with secretName',
          )
          .describe(
            'Where each batch is POSTed; its host must be on HTTP_ALLOWED_HOSTS for every tenant (an entry without a tenant). ' +
              'Keys that may read the queue see it: put no credential in it.',
          ),
        secretName: reachableName(DELIVERY_SECRET_PREFIX)
          .optional()
          .describe(
            `The name of the Worker secret that signs the POSTs (32 characters or more), starting with ${DELIVERY_SECRET_PREFIX}: ` +
              "each tenant's POSTs are signed (Standard Webhooks) with the endpoint secret httpEndpointSecret derives from it " +
              'for that tenant and this URL.',
          ),
        batchSize: intSchema(1, 1000).optional().describe('Jobs per POST, all of one tenant; default 100.'),
        maxBatchBytes: intSchema(1024, 10 * 1024 * 1024)
          .optional()
          .describe('Bytes of jobs per POST; default 1048576. A job larger alone goes alone.'),
        timeoutMs: intSchema(1, 300_000)
          .optional()
          .describe('How long the receiver may take to answer; default 10000.'),
      })
      .openapi('WebhookTarget'),
    z
      .strictObject({
        target: z.literal('cloudflare-queue'),
        binding: reachableName(DELIVERY_QUEUE_PREFIX).describe(
          `The name of the Worker's Queues producer binding, starting with ${DELIVERY_QUEUE_PREFIX}.`,
        ),
        batchSize: intSchema(1, 1000)
          .optional()
          .describe('Jobs per drain batch, sent in calls of up to 100 messages; default 100.'),
        delaySeconds: intSchema(0, 43_200)
          .optional()
          .describe('Seconds the queue holds each message before its consumer sees it.'),
      })
      .openapi('CloudflareQueueTarget'),
  ])
  .describe(
    "Where the queue's jobs go, whatever their type, instead of to handlers: each job once or more (at least once), with its id.",
  )
  .openapi('DeliveryTarget') satisfies z.ZodType<DeliveryTarget>;

/** A queue's delivery target as a read answers it. */
export const QueueDeliverySchema = DeliveryTargetSchema.nullable()
  .optional()
  .describe(
    "The queue's delivery target, null for none; left out for a tenant-bound key (where a queue's jobs go is its operator's).",
  );

/** A queue's retention: whole seconds from a minute, or "none"; a shorter one is refused by name. */
const RETENTION_RULE = 'whole seconds from 60 to 315360000 (ten years), or "none" to keep no history of succeeded jobs';
export const RetentionSchema = z
  .union(
    [z.literal('none'), z.int({ error: RETENTION_RULE }).min(60, RETENTION_RULE).max(315_360_000, RETENTION_RULE)],
    { error: RETENTION_RULE },
  )
  .describe(
    'How long the queue\'s finished jobs are kept, in seconds, or "none": its succeeded jobs keep no history (deleted ' +
      'once the hourly statistics have summed them), while failed, cancelled and expired ones are kept for the default ' +
      "retention. Null for the default (RETENTION_SECONDS); a job type's own retention wins over it.",
  );

/** The queue a queue's jobs that fail for good move to. */
export const DeadLetterQueueSchema = NameSchema.describe(
  "Where the queue's jobs that fail for good move, to wait again with fresh attempts (as a redrive with toQueue): " +
    'once a job; a job with a concurrency, ordering or rate key stays failed in its queue. Null for none. Not the queue itself.',
);

/** A queue's rate limit, over all its tenants; not a named component, as the generator drops `.nullable()` from a reference. */
export const QueueRateLimitSchema = z
  .strictObject({
    count: intSchema(1, MAX_QUEUE_RATE_LIMIT).describe('Jobs of the queue that may start in any window…'),
    perSeconds: intSchema(1, MAX_QUEUE_RATE_SECONDS).describe('…of this many seconds (a sliding window).'),
    onExcess: z
      .enum(['throttle', 'drop'])
      .default('throttle')
      .describe(
        'What becomes of a job beyond the limit. throttle: it waits in the queue for room. drop: a job enqueued while ' +
          'the window has no room (its starts, and the jobs let through but not started yet, count) ends cancelled at ' +
          'once, its lastError a RateLimitedError naming the queue.',
      ),
  })
  .describe(
    "At most `count` of the queue's jobs start in any `perSeconds` seconds, whatever their tenant, every attempt " +
      'counted, however many workers claim; the excess waits in the queue for room, or is dropped at enqueue. Null ' +
      'for no limit.',
  );

/** PUT replaces every setting; one left out takes its default (no cap, weight 1, no delivery target, the default retention). */
export const QueueSettingsBodySchema = z
  .strictObject({
    concurrency: intSchema(0, 100_000)
      .nullable()
      .default(null)
      .describe('Running jobs of the queue at once, over all tenants; null for no cap.'),
    weight: intSchema(1, 1000).default(1).describe("Share of each tenant's turns when its queues compete."),
    delivery: DeliveryTargetSchema.nullable().default(null),
    retentionSeconds: RetentionSchema.nullable().default(null),
    deadLetterQueue: DeadLetterQueueSchema.nullable().default(null),
    rateLimit: QueueRateLimitSchema.nullable().default(null),
  })
  .openapi('QueueSettings');

/** When a queue was paused. */
export const PausedAtSchema = z
  .string()
  .nullable()
  .describe('When the queue was paused (no claim takes its jobs until it is resumed); null while it runs.');

export const QueueSchema = z
  .object({
    name: z.string(),
    concurrency: z.int().nullable(),
    weight: z.int(),
    delivery: QueueDeliverySchema,
    pausedAt: PausedAtSchema,
    retentionSeconds: RetentionSchema.nullable(),
    deadLetterQueue: DeadLetterQueueSchema.nullable(),
    rateLimit: QueueRateLimitSchema.nullable(),
    custom: z.boolean().describe('False when the queue runs on the defaults.'),
    running: z.int().describe("Jobs of this queue running now (a tenant-bound key counts its own tenant's)."),
    startsInWindow: z
      .int()
      .nullable()
      .describe("With a rate limit, the queue's starts (every tenant's) in the window that ends now; else null."),
  })
  .openapi('Queue');
