import { z } from '@hono/zod-openapi';
import { LIMITS } from '../limits.js';
import { NameSchema, queryNumberSchema } from './common.js';

export const ConcurrencyKeySchema = z
  .object({
    tenant: z.string(),
    key: z.string(),
    ordered: z.boolean().describe('An ordering key: one slot, turns in enqueue order.'),
    slots: z
      .number()
      .int()
      .nullable()
      .describe("Jobs of the key past their turn at most (its latest job's concurrencyLimit); null for a rate key."),
    taken: z
      .number()
      .int()
      .describe(
        'Slots taken now: jobs waiting to start, running, retrying or parked (a rate key: turns given, not started yet).',
      ),
    rate: z
      .object({
        limit: z.number().int().describe("Starts per period (its latest job's rateLimit)."),
        periodSeconds: z.number().int(),
        onExcess: z.enum(['throttle', 'drop']),
        startsInWindow: z.number().int().describe('Starts in the window that ends now.'),
        nextRoomAt: z.string().nullable().describe('When the window next has room for the held jobs.'),
      })
      .nullable()
      .describe('A rate key: its limit and window; null for a concurrency or ordering key.'),
    held: z.number().int().describe('Jobs held for a turn.'),
    onFailure: z.enum(['hold', 'continue']),
    blockedBy: z
      .string()
      .nullable()
      .describe('The failed head that holds an ordering key: retry it, or unblock the key to let the next job run.'),
    blockedAt: z.string().nullable(),
  })
  .openapi('ConcurrencyKey');

export const ConcurrencyKeyPageSchema = z
  .object({
    keys: z.array(ConcurrencyKeySchema),
    nextCursor: z.string().nullable().describe('Pass as `cursor` for the next page; null on the last.'),
  })
  .openapi('ConcurrencyKeyPage');

export const ListConcurrencyKeysQuerySchema = z.object({
  tenant: NameSchema.optional().describe("A tenant-bound key lists its own tenant's keys only."),
  blocked: z.enum(['true', 'false']).optional().describe('Only the ordering keys a failed head holds.'),
  cursor: z.string().max(600).optional().describe('The nextCursor of the previous page.'),
  limit: queryNumberSchema(1, LIMITS.maxPage, { integer: true })
    .optional()
    .describe(`Page size, 1 to ${LIMITS.maxPage}; default 50.`),
});

export const ConcurrencyKeyParamsSchema = z.object({
  key: z
    .string()
    .min(1)
    .max(256)
    .openapi({ param: { name: 'key', in: 'path' } }),
});

export const UnblockKeyQuerySchema = z.object({
  tenant: NameSchema.optional().describe("The key's tenant; default 'default' (a tenant-bound key: its own)."),
});

export const UnblockKeyResponseSchema = z
  .object({
    unblocked: z.boolean().describe('False when the key was not held by a failed head: nothing changed.'),
  })
  .openapi('UnblockKeyResponse');
