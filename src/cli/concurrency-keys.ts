import { successBody } from '../http/client.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { table } from './table.js';

/** `skiplock concurrency-keys list`: the keys in use, with their slots or rate, held jobs and failed heads. */
const list = operatorCommand({
  usage: 'skiplock concurrency-keys list [--tenant T] [--blocked] [--cursor C]',
  options: { tenant: { type: 'string' }, blocked: { type: 'boolean' }, cursor: { type: 'string' } },
  async run({ values, connection }) {
    const query = {
      ...(values.tenant === undefined ? {} : { tenant: values.tenant }),
      ...(values.blocked ? { blocked: 'true' as const } : {}),
      ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
    };
    const page = await successBody(connection.api.v1['concurrency-keys'].$get({ query }));
    if (page.keys.length === 0)
      return { json: page, human: values.blocked ? 'no key is held by a failed job' : 'no keys in use' };
    const rows = page.keys.map((key) => [
      key.tenant,
      key.key,
      key.ordered ? 'ordering' : key.rate === null ? 'concurrency' : 'rate',
      key.rate === null
        ? `${key.taken}/${key.slots}`
        : `${key.rate.startsInWindow}/${key.rate.limit} per ${key.rate.periodSeconds} s`,
      String(key.held),
      key.blockedBy === null ? '-' : `by ${key.blockedBy} since ${key.blockedAt}`,
    ]);
    const more = page.nextCursor === null ? '' : `\n(more: --cursor ${page.nextCursor})`;
    return { json: page, human: `${table(['tenant', 'key', 'kind', 'taken', 'held', 'blocked'], rows)}${more}` };
  },
});

/** `skiplock concurrency-keys unblock KEY`: an ordering key held by its failed head lets its next job run. */
const unblock = operatorCommand({
  usage: 'skiplock concurrency-keys unblock KEY [--tenant T]',
  options: { tenant: { type: 'string' } },
  positionals: ['KEY'],
  async run({ values, positionals: [key], connection }) {
    const route = connection.api.v1['concurrency-keys'][':key'].unblock;
    const answer = await successBody(
      route.$post({ param: { key: key! }, query: values.tenant === undefined ? {} : { tenant: values.tenant } }),
    );
    return {
      json: answer,
      human: answer.unblocked ? `${key}: unblocked; its next job takes the turn` : `${key}: not held; nothing changed`,
    };
  },
});

/** `skiplock concurrency-keys list|unblock`. */
export const concurrencyKeysCommand = withSubcommands('concurrency-keys', {
  list: { run: list, summary: 'the keys in use: slots taken, jobs held, failed heads holding ordering keys' },
  unblock: { run: unblock, summary: 'let an ordering key held by its failed head go on to its next job' },
});
