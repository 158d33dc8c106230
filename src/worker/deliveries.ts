import type { QueueProducer } from '../drain/bulk-delivery/cloudflare-queue.js';
import { QueueDeliveries, type QueueDeliveriesOptions } from '../drain/bulk-delivery/queue-deliveries.js';
import type { Bindings } from '../http/context.js';

/**
 * The delivery targets a Worker reaches: webhooks signed with its secrets
 * (named by the queue's target, read from `env`), and its Queues producer
 * bindings.
 */
export function workerDeliveries(env: Bindings, http: QueueDeliveriesOptions['http']): QueueDeliveries {
  const bindings = env as Record<string, unknown>;
  return new QueueDeliveries({
    http,
    secret: (name) => (typeof bindings[name] === 'string' ? bindings[name] : undefined),
    producer: (name) => (isQueueProducer(bindings[name]) ? bindings[name] : undefined),
  });
}

function isQueueProducer(binding: unknown): binding is QueueProducer {
  return (
    typeof binding === 'object' &&
    binding !== null &&
    typeof (binding as Partial<QueueProducer>).sendBatch === 'function'
  );
}
