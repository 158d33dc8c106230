import { successBody } from '../http/client.js';
import type { Queue } from '../engine/index.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { wholeNumber, wholeNumberOrNone } from './read-options.js';
import { fields } from './table.js';

const get = operatorCommand({
  usage: 'skiplock queues get QUEUE',
  options: {},
  positionals: ['QUEUE'],
  async run({ positionals: [queue], connection }) {
    const answer = await successBody(connection.api.v1.queues[':queue'].$get({ param: { queue: queue! } }));
    return { json: answer, human: describeQueue(answer) };
  },
});

const set = operatorCommand({
  usage: 'skiplock queues set QUEUE [--concurrency N|none] [--weight N]',
  options: { concurrency: { type: 'string' }, weight: { type: 'string' } },
  positionals: ['QUEUE'],
  async run({ values, positionals: [queue], connection }) {
    const given = {
      ...(values.concurrency === undefined ? {} : { concurrency: wholeNumberOrNone(values.concurrency, '--concurrency') }),
      ...(values.weight === undefined ? {} : { weight: wholeNumber(values.weight, '--weight') }),
    };
    if (Object.keys(given).length === 0) throw usageFailure('give at least one of --concurrency, --weight');
    const route = connection.api.v1.queues[':queue'];
    // The API replaces both settings at once; the one not given here keeps its current value.
    const { concurrency, weight } = await successBody(route.$get({ param: { queue: queue! } }));
    const answer = await successBody(route.$put({ param: { queue: queue! }, json: { concurrency, weight, ...given } }));
    return { json: answer, human: describeQueue(answer) };
  },
});

/** `skiplock queues get|set`: a queue's concurrency cap and weight. */
export const queueSettingsCommand = withSubcommands('queues', {
  get: { run: get, summary: "a queue's concurrency cap, weight and running jobs" },
  set: { run: set, summary: "change a queue's concurrency cap or weight (the other stays)" },
});

function describeQueue(queue: Queue): string {
  return fields([
    ['queue', `${queue.name}${queue.custom ? '' : ' (on the defaults)'}`],
    ['concurrency', queue.concurrency === null ? 'no cap' : `${queue.concurrency} running at once, over all tenants`],
    ['weight', String(queue.weight)],
    ['running', String(queue.running)],
  ]);
}
