import { z } from '@hono/zod-openapi';
import { API_KEY_SCOPES } from '../../engine/api-keys.js';
import { NameSchema, TimestampSchema, UuidSchema } from './common.js';
import { WorkerIdSchema } from './pull.js';

const ScopeSchema = z.enum(API_KEY_SCOPES).openapi('Scope');

export const CreateApiKeyBodySchema = z
  .strictObject({
    name: NameSchema.describe('What the key is for, to recognize it in the list.'),
    scopes: z
      .array(ScopeSchema)
      .min(1)
      .max(API_KEY_SCOPES.length)
      .refine((scopes) => new Set(scopes).size === scopes.length, 'must not repeat a scope'),
    tenant: NameSchema.optional().describe("Bind the key to this tenant: it sees and touches only this tenant's jobs."),
    workerId: WorkerIdSchema.optional().describe(
      'Bind the key to this worker id (a key with the worker scope): it claims under this id only, and it alone may hand ' +
        'back all that the id holds (POST /v1/workers/{workerId}/release). Give each worker process its own.',
    ),
  })
  .refine((key) => key.tenant === undefined || !key.scopes.includes('admin'), {
    message: 'an admin key reaches every tenant, so it cannot be bound to one',
    path: ['tenant'],
  })
  .refine((key) => key.workerId === undefined || (key.scopes.includes('worker') && !key.scopes.includes('admin')), {
    message: 'only a key with the worker scope, and not admin, can be bound to a worker id',
    path: ['workerId'],
  })
  .openapi('CreateApiKeyRequest');

export const ApiKeySchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    scopes: z.array(ScopeSchema),
    tenant: z.string().nullable(),
    workerId: z.string().nullable().describe('The worker id the key is bound to; null for none.'),
    secretPrefix: z.string().describe('The first characters of the secret.'),
    createdAt: TimestampSchema,
    revokedAt: TimestampSchema.nullable(),
  })
  .openapi('ApiKey');

export const CreatedApiKeySchema = ApiKeySchema.extend({
  secret: z.string().describe('The key itself, shown this once: only its hash is stored.'),
}).openapi('CreatedApiKey');

export const ApiKeyListSchema = z.object({ keys: z.array(ApiKeySchema) }).openapi('ApiKeyList');

export const ApiKeyParamsSchema = z.object({
  id: UuidSchema.openapi({ param: { name: 'id', in: 'path' } }),
});
