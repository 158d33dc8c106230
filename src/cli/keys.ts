import { successBody } from '../http/client.js';
import { API_KEY_SCOPES, type ApiKeyScope } from '../engine/api-keys.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { fields, shortTime, table } from './table.js';

const create = operatorCommand({
  usage: 'skiplock keys create --name NAME --scope SCOPE[,SCOPE...] [--tenant TENANT] [--worker-id WORKER]',
  options: {
    name: { type: 'string' },
    scope: { type: 'string', multiple: true },
    tenant: { type: 'string' },
    'worker-id': { type: 'string' },
  },
  async run({ values: { name, scope = [], tenant, 'worker-id': workerId }, connection }) {
    if (name === undefined || scope.length === 0)
      throw usageFailure(`--name and at least one --scope (${API_KEY_SCOPES.join(', ')}) are required`);
    // The API checks the scopes and names the ones there are.
    const scopes = scope.flatMap((value) => value.split(',')).map((value) => value.trim()) as ApiKeyScope[];
    const key = await successBody(connection.api.v1.keys.$post({ json: { name, scopes, tenant, workerId } }));
    const human = fields([
      ['key', `${key.id} (${key.name})`],
      ['scopes', key.scopes.join(', ')],
      ['tenant', key.tenant ?? 'every tenant'],
      ...(key.workerId === null
        ? []
        : [['worker', `${key.workerId} only (it may hand back that worker's jobs)`] as [string, string]]),
      ['secret', `${key.secret}  (shown this once: only its hash is stored)`],
    ]);
    return { json: key, human };
  },
});

const list = operatorCommand({
  usage: 'skiplock keys list',
  options: {},
  async run({ connection }) {
    const answer = await successBody(connection.api.v1.keys.$get());
    const rows = answer.keys.map((key) => [
      key.id,
      key.name,
      key.scopes.join(','),
      key.tenant ?? '*',
      key.workerId ?? '*',
      `${key.secretPrefix}…`,
      shortTime(key.createdAt),
      shortTime(key.revokedAt),
    ]);
    const human =
      rows.length === 0
        ? 'no API keys (the ADMIN_TOKEN is not one of them)'
        : table(['id', 'name', 'scopes', 'tenant', 'worker', 'secret', 'created', 'revoked'], rows);
    return { json: answer, human };
  },
});

const revoke = operatorCommand({
  usage: 'skiplock keys revoke KEY_ID',
  options: {},
  positionals: ['KEY_ID'],
  async run({ positionals: [id], connection }) {
    const key = await successBody(connection.api.v1.keys[':id'].$delete({ param: { id: id! } }));
    return { json: key, human: `key ${key.id} (${key.name}) is revoked since ${shortTime(key.revokedAt)}` };
  },
});

export const keysCommand = withSubcommands('keys', {
  create: {
    run: create,
    summary: `a new API key with scopes (${API_KEY_SCOPES.join(', ')}); its secret is shown this once`,
  },
  list: { run: list, summary: 'every API key, revoked ones too, without secrets' },
  revoke: { run: revoke, summary: 'revoke an API key at once' },
});
