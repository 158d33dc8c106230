import type { SendEventRequest } from '../http/client.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { wholeNumberFlag } from './read-options.js';

const send = operatorCommand({
  usage: 'skiplock events send EVENT [--key KEY] [--payload JSON] [--tenant TENANT] [--keep-seconds N]',
  options: {
    key: { type: 'string' },
    payload: { type: 'string' },
    tenant: { type: 'string' },
    'keep-seconds': { type: 'string' },
  },
  positionals: ['EVENT'],
  async run({ values: { key, payload, tenant, 'keep-seconds': keep }, positionals: [event], connection }) {
    // The API checks the name's and key's lengths, the tenant and the range of --keep-seconds, and names what is wrong.
    const request: SendEventRequest = {
      event: event!,
      ...(key === undefined ? {} : { key }),
      ...(payload === undefined ? {} : { payload: json(payload, '--payload') }),
      ...(tenant === undefined ? {} : { tenant }),
      ...(keep === undefined ? {} : { keepSeconds: wholeNumberFlag(keep, '--keep-seconds') }),
    };
    const sent = await connection.jobs.sendEvent(request);
    const keyed = sent.key === null ? '' : ` (key ${sent.key})`;
    const woken = `${sent.woken} job${sent.woken === 1 ? '' : 's'} woken`;
    return { json: sent, human: `sent ${sent.event}${keyed} to tenant ${sent.tenant}: ${woken}` };
  },
});

export const eventsCommand = withSubcommands('events', {
  send: {
    run: send,
    summary: 'send an event: the jobs waiting for it (its name, and its --key) resume with its --payload',
  },
});

function json(value: string, flag: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw usageFailure(`${flag} must be JSON, such as '{"ok":true}', not "${value}"`);
  }
}
