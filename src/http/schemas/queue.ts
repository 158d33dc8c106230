import { z } from '@hono/zod-openapi';
import type { DeliveryTarget } from '../../engine/index.js';
import { intSchema } from './common.js';

/** A Worker binding's or secret's name, as wrangler accepts it. */
const bindingName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'a binding name: letters, digits and _, not starting with a digit');

export const DeliveryTargetSchema = z
  .discriminatedUnion('target', [
    z
      .strictObject({
        target: z.literal('webhook'),
        url: z
          .url({ protocol: /^https?$/ })
          .max(2048)
          .describe('Where each batch is POSTed; its host must be on HTTP_ALLOWED_HOSTS for every tenant (an entry without a tenant).'),
        secretName: bindingName
          .optional()
          .describe("The name of the Worker secret holding the receiver's Standard Webhooks secret (whsec_...): every POST is signed with it."),
        batchSize: intSchema(1, 1000).optional().describe('Jobs per POST; default 100.'),
        timeoutMs: intSchema(1, 300_000).optional().describe('How long the receiver may take to answer; default 10000.'),
      })
      .openapi('WebhookTarget'),
    z
      .strictObject({
        target: z.literal('cloudflare-queue'),
        binding: bindingName.describe("The name of the Worker's Queues producer binding."),
        batchSize: intSchema(1, 1000).optional().describe('Jobs per drain batch, sent in calls of up to 100 messages; default 100.'),
        delaySeconds: intSchema(0, 43_200).optional().describe("Seconds the queue holds each message before its consumer sees it."),
      })
      .openapi('CloudflareQueueTarget'),
  ])
  .describe("Where the queue's jobs go, whatever their type, instead of to handlers: each job once or more (at least once), with its id.")
  .openapi('DeliveryTarget') satisfies z.ZodType<DeliveryTarget>;

/** PUT replaces every setting; one left out takes its default (no cap, weight 1, no delivery target). */
export const QueueSettingsBodySchema = z
  .strictObject({
    concurrency: intSchema(0, 100_000)
      .nullable()
      .default(null)
      .describe("Running jobs of the queue at once, over all tenants; null for no cap."),
    weight: intSchema(1, 1000).default(1).describe("Share of each tenant's turns when its queues compete."),
    delivery: DeliveryTargetSchema.nullable().default(null),
  })
  .openapi('QueueSettings');

export const QueueSchema = z
  .object({
    name: z.string(),
    concurrency: z.int().nullable(),
    weight: z.int(),
    delivery: DeliveryTargetSchema.nullable(),
    custom: z.boolean().describe('False when the queue runs on the defaults.'),
    running: z.int().describe("Jobs of this queue running now (a tenant-bound key counts its own tenant's)."),
  })
  .openapi('Queue');
