import { z } from '@hono/zod-openapi';
import { intSchema, NameSchema } from './common.js';

// Not a named component: the generator drops `.nullable()` from a reference, and this one may be null.
const RateLimitSchema = z.strictObject({
  count: intSchema(0, 1_000_000).describe('Jobs that may start per window…'),
  perSeconds: intSchema(1, 86_400).describe('…of this many seconds.'),
});

/** PUT replaces every setting; one left out takes its default (no limit, weight 1). */
export const TenantSettingsBodySchema = z
  .strictObject({
    concurrency: intSchema(0, 100_000).nullable().default(null).describe('Running jobs at once; null for no limit.'),
    rateLimit: RateLimitSchema.nullable().default(null),
    weight: intSchema(1, 1000).default(1).describe('Share of turns when tenants compete.'),
  })
  .openapi('TenantSettings');

export const TenantSchema = z
  .object({
    name: z.string(),
    concurrency: z.int().nullable(),
    rateLimit: z.object({ count: z.int(), perSeconds: z.int() }).nullable(),
    weight: z.int(),
    custom: z.boolean().describe('False when the tenant runs on the defaults.'),
    running: z.int().describe('Jobs of this tenant running now.'),
  })
  .openapi('Tenant');

export const TenantParamsSchema = z.object({
  tenant: NameSchema.openapi({ param: { name: 'tenant', in: 'path' } }),
});
