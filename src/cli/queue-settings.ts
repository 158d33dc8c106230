import { successBody } from '../http/client.js';
import type { DeliveryTarget, Queue, QueueRateLimit, RateOnExcess, Retention } from '../engine/index.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { rateLimitFlag, retentionFlag, wholeNumberFlag, wholeNumberOrNoneFlag } from './read-options.js';
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
  usage:
    'skiplock queues set QUEUE [--concurrency N|none] [--rate-limit COUNT/SECONDS|none] [--rate-on-excess throttle|drop] ' +
    '[--weight N] ' +
    '[--webhook URL [--secret-name NAME] | --cloudflare-queue BINDING | --no-delivery] [--batch-size N]',
  options: {
    concurrency: { type: 'string' },
    'rate-limit': { type: 'string' },
    'rate-on-excess': { type: 'string' },
    weight: { type: 'string' },
    webhook: { type: 'string' },
    'secret-name': { type: 'string' },
    'cloudflare-queue': { type: 'string' },
    'no-delivery': { type: 'boolean', default: false },
    'batch-size': { type: 'string' },
    retention: { type: 'string' },
    'dead-letter-queue': { type: 'string' },
  },
  positionals: ['QUEUE'],
  async run({ values, positionals: [queue], connection }) {
    const delivery = deliveryOf(values);
    const given = {
      ...(values.concurrency === undefined
        ? {}
        : { concurrency: wholeNumberOrNoneFlag(values.concurrency, '--concurrency') }),
      ...(values.weight === undefined ? {} : { weight: wholeNumberFlag(values.weight, '--weight') }),
      ...(delivery === undefined ? {} : { delivery }),
      ...(values.retention === undefined ? {} : { retentionSeconds: retentionFlag(values.retention) }),
      ...(values['dead-letter-queue'] === undefined
        ? {}
        : { deadLetterQueue: values['dead-letter-queue'] === 'none' ? null : values['dead-letter-queue'] }),
    };
    const rateLimitGiven = values['rate-limit'] === undefined ? undefined : rateLimitFlag(values['rate-limit']);
    const onExcess = onExcessFlag(values['rate-on-excess']);
    if (rateLimitGiven === null && onExcess !== undefined) {
      throw usageFailure('--rate-on-excess needs a rate limit, not --rate-limit none');
    }
    if (Object.keys(given).length === 0 && rateLimitGiven === undefined && onExcess === undefined) {
      throw usageFailure(
        'give at least one of --concurrency, --rate-limit, --rate-on-excess, --weight, --webhook, --cloudflare-queue, ' +
          '--no-delivery, --retention, --dead-letter-queue',
      );
    }
    const route = connection.api.v1.queues[':queue'];
    // The API replaces every setting at once; those not given here keep their current values.
    const current = await successBody(route.$get({ param: { queue: queue! } }));
    const { concurrency, weight, retentionSeconds, deadLetterQueue } = current;
    const rateLimit = rateLimitOf(current.rateLimit, rateLimitGiven, onExcess);
    const answer = await successBody(
      route.$put({
        param: { queue: queue! },
        json: {
          concurrency,
          weight,
          delivery: current.delivery,
          retentionSeconds,
          deadLetterQueue,
          rateLimit,
          ...given,
        },
      }),
    );
    return { json: answer, human: describeQueue(answer) };
  },
});

/** `--rate-on-excess`: throttle or drop, or undefined when not given. */
function onExcessFlag(value: string | undefined): RateOnExcess | undefined {
  if (value === undefined || value === 'throttle' || value === 'drop') return value;
  throw usageFailure(`--rate-on-excess must be throttle or drop, not "${value}"`);
}

/** The rate limit to set: the numbers given (or the current ones) with the behaviour given (or the current one). */
function rateLimitOf(
  current: QueueRateLimit | null,
  given: { count: number; perSeconds: number } | null | undefined,
  onExcess: RateOnExcess | undefined,
): QueueRateLimit | null {
  if (given === null) return null;
  const numbers = given ?? current;
  if (numbers === null) {
    if (onExcess === undefined) return null;
    throw usageFailure('--rate-on-excess needs a rate limit: give --rate-limit COUNT/SECONDS too');
  }
  return {
    count: numbers.count,
    perSeconds: numbers.perSeconds,
    onExcess: onExcess ?? current?.onExcess ?? 'throttle',
  };
}

/** `skiplock queues pause|resume QUEUE`. */
function pauseCommand(action: 'pause' | 'resume') {
  return operatorCommand({
    usage: `skiplock queues ${action} QUEUE`,
    options: {},
    positionals: ['QUEUE'],
    async run({ positionals: [queue], connection }) {
      const route = connection.api.v1.queues[':queue'][action];
      const answer = await successBody(route.$post({ param: { queue: queue! } }));
      return { json: answer, human: describeQueue(answer) };
    },
  });
}

/** The delivery target the flags give: a new one, none (`--no-delivery`), or undefined to keep the current one. */
function deliveryOf(values: {
  webhook?: string | undefined;
  'secret-name'?: string | undefined;
  'cloudflare-queue'?: string | undefined;
  'no-delivery'?: boolean | undefined;
  'batch-size'?: string | undefined;
}): DeliveryTarget | null | undefined {
  const chosen = [
    values.webhook !== undefined,
    values['cloudflare-queue'] !== undefined,
    values['no-delivery'] === true,
  ];
  if (chosen.filter(Boolean).length > 1) throw usageFailure('give one of --webhook, --cloudflare-queue, --no-delivery');
  if (values['secret-name'] !== undefined && values.webhook === undefined)
    throw usageFailure('--secret-name goes with --webhook');
  if (values['batch-size'] !== undefined && values.webhook === undefined && values['cloudflare-queue'] === undefined) {
    throw usageFailure('--batch-size goes with --webhook or --cloudflare-queue');
  }
  const batchSize =
    values['batch-size'] === undefined ? {} : { batchSize: wholeNumberFlag(values['batch-size'], '--batch-size') };
  if (values.webhook !== undefined) {
    const secretName = values['secret-name'] === undefined ? {} : { secretName: values['secret-name'] };
    return { target: 'webhook', url: values.webhook, ...secretName, ...batchSize };
  }
  if (values['cloudflare-queue'] !== undefined)
    return { target: 'cloudflare-queue', binding: values['cloudflare-queue'], ...batchSize };
  return values['no-delivery'] === true ? null : undefined;
}

/** `skiplock queues get|set|pause|resume`: a queue's settings, and pausing it. */
export const queueSettingsCommand = withSubcommands('queues', {
  get: {
    run: get,
    summary: "a queue's concurrency cap, rate limit, weight, delivery target, retention and running jobs",
  },
  set: {
    run: set,
    summary: "change a queue's concurrency cap, rate limit, weight, delivery target or retention (the others stay)",
  },
  pause: { run: pauseCommand('pause'), summary: 'stop claims taking its jobs (waiting jobs and settings stay)' },
  resume: { run: pauseCommand('resume'), summary: 'let claims take its jobs again' },
});

/** A queue as the API answers it; a tenant-bound key is not told its delivery target. */
type QueueAnswer = Omit<Queue, 'delivery'> & { delivery?: DeliveryTarget | null };

function describeQueue(queue: QueueAnswer): string {
  return fields([
    ['queue', `${queue.name}${queue.custom ? '' : ' (on the defaults)'}`],
    ['concurrency', queue.concurrency === null ? 'no cap' : `${queue.concurrency} running at once, over all tenants`],
    [
      'rate limit',
      queue.rateLimit === null
        ? 'none'
        : `${queue.rateLimit.count} started per ${queue.rateLimit.perSeconds} s, over all tenants, ` +
          `${queue.rateLimit.onExcess === 'drop' ? 'the excess dropped at enqueue' : 'the excess waits'} ` +
          `(${queue.startsInWindow} in the window now)`,
    ],
    ['weight', String(queue.weight)],
    ['delivery', describeDelivery(queue.delivery)],
    ['running', String(queue.running)],
    ['paused', queue.pausedAt === null ? 'no' : `since ${queue.pausedAt}`],
    ['retention', describeRetention(queue.retentionSeconds)],
    [
      'dead letters',
      queue.deadLetterQueue === null ? 'none (failed jobs stay here)' : `failed jobs move to ${queue.deadLetterQueue}`,
    ],
  ]);
}

function describeRetention(retention: Retention | null): string {
  if (retention === null) return 'the default (RETENTION_SECONDS), unless a job type has its own';
  if (retention === 'none') return 'none for succeeded jobs (failed ones: the default)';
  return `${retention} s, unless a job type has its own`;
}

/** A delivery target in a few words: where, and how it is sent. */
export function describeDelivery(delivery: DeliveryTarget | null | undefined): string {
  if (delivery === undefined) return 'not shown to a tenant-bound key';
  if (delivery === null) return 'none (handlers run the jobs)';
  const batch = `batches of ${delivery.batchSize ?? 100}`;
  if (delivery.target === 'webhook') {
    return `webhook ${delivery.url}, ${batch} of one tenant, ${delivery.secretName === undefined ? 'unsigned' : `signed with ${delivery.secretName}`}`;
  }
  const delay = delivery.delaySeconds === undefined ? '' : `, held ${delivery.delaySeconds} s`;
  return `Cloudflare queue ${delivery.binding}, ${batch}${delay}`;
}
