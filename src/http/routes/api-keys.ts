import { createApiKey, listApiKeys, revokeApiKey } from '../../engine/api-keys.js';
import { newApiKeySecret, shownPrefixOf } from '../auth/api-key-secret.js';
import { sha256Hex } from '../auth/crypto.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { notFound } from '../problem.js';
import {
  ApiKeyListSchema,
  ApiKeyParamsSchema,
  ApiKeySchema,
  CreateApiKeyBodySchema,
  CreatedApiKeySchema,
} from '../schemas/api-key.js';
import { router } from '../validation.js';

export function apiKeyRoutes(deps: AppDeps) {
  const createKeyRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'post',
      path: '/v1/keys',
      operationId: 'createApiKey',
      tags: ['keys'],
      summary: 'Create an API key',
      description: 'The answer holds the secret, this once: only its SHA-256 is stored.',
      request: { body: jsonBody(CreateApiKeyBodySchema) },
      responses: {
        201: jsonResponse(CreatedApiKeySchema, 'The key, with its secret'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  const listKeysRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'get',
      path: '/v1/keys',
      operationId: 'listApiKeys',
      tags: ['keys'],
      summary: 'List API keys, revoked ones included, without their secrets',
      responses: { 200: jsonResponse(ApiKeyListSchema, 'Every key, newest first'), ...problemResponses(401, 403, 503) },
    },
  );

  const revokeKeyRoute = authorizedRoute(
    deps,
    { scopes: ['admin'] },
    {
      method: 'delete',
      path: '/v1/keys/{id}',
      operationId: 'revokeApiKey',
      tags: ['keys'],
      summary: 'Revoke an API key',
      description: 'At once; revoking a revoked key changes nothing.',
      request: { params: ApiKeyParamsSchema },
      responses: { 200: jsonResponse(ApiKeySchema, 'The revoked key'), ...problemResponses(400, 401, 403, 404, 503) },
    },
  );

  return router()
    .openapi(createKeyRoute, async (c) => {
      const { name, scopes, tenant, workerId } = c.req.valid('json');
      const secret = newApiKeySecret();
      const key = await createApiKey(deps.database(c.env), {
        name,
        scopes,
        tenant,
        workerId,
        secretSha256: await sha256Hex(secret),
        secretPrefix: shownPrefixOf(secret),
      });
      return c.json({ ...key, secret }, 201);
    })
    .openapi(listKeysRoute, async (c) => c.json({ keys: await listApiKeys(deps.database(c.env)) }, 200))
    .openapi(revokeKeyRoute, async (c) => {
      const key = await revokeApiKey(deps.database(c.env), c.req.valid('param').id);
      if (key === undefined) throw notFound('no API key with this id');
      return c.json(key, 200);
    });
}
