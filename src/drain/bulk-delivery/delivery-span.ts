import type { TraceContext } from '../../engine/trace-context.js';
import { inSpan, MESSAGING_SYSTEM, type SpanAttributes, type Tracing } from '../../engine/tracing.js';
import type { BatchItem } from '../define-batch-job.js';
import type { StepsOwner } from '../steps.js';
import type { DeliveredJob } from './delivered-job.js';

/** One delivery: the jobs of one webhook POST or one `sendBatch` call, and what it goes to. */
export interface Delivery {
  jobs: readonly DeliveredJob[];
  target: 'webhook' | 'cloudflare-queue';
  /** What names the receiver: a webhook's `server.address`. */
  attributes?: SpanAttributes;
}

/**
 * Runs one delivery in a span (messaging `send`, PRODUCER, `deliver
 * <queue>`) when the drain traces: a child of the first job's attempt span
 * and linked to every job's, as the messaging conventions ask of a batch
 * sent, and it hands `send` its own context, for the receiver to continue
 * (a webhook's `traceparent` header). Without tracing, `send` runs as it is.
 */
export function inDeliverySpan<T>(
  tracing: Tracing | undefined,
  delivery: Delivery,
  send: (context: TraceContext | undefined) => Promise<T>,
): Promise<T> {
  if (tracing === undefined) return send(undefined);
  const contexts = delivery.jobs.flatMap(traceContextOf);
  const queues = [...new Set(delivery.jobs.map((job) => job.queue))];
  return inSpan(
    tracing,
    queues.length === 1 ? `deliver ${queues[0]}` : 'deliver',
    {
      kind: 'producer',
      parent: contexts[0],
      links: contexts,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'deliver',
        ...(queues.length === 1 ? { 'messaging.destination.name': queues[0]! } : {}),
        ...(delivery.jobs.length === 1 ? {} : { 'messaging.batch.message_count': delivery.jobs.length }),
        'skiplock.delivery.target': delivery.target,
        ...delivery.attributes,
      },
    },
    send,
  );
}

/** The context a delivered job carries, as a list of none or one. */
function traceContextOf({ traceparent, tracestate }: DeliveredJob): TraceContext[] {
  if (traceparent === undefined) return [];
  return [tracestate === undefined ? { traceparent } : { traceparent, tracestate }];
}

/**
 * The drain's tracing, which each attempt carries (its steps make their
 * spans with it): a batch's deliveries trace when the drain that runs them does.
 */
export function tracingOf(items: ReadonlyArray<BatchItem<unknown>>): Tracing | undefined {
  return (items[0]?.context as Partial<StepsOwner> | undefined)?.tracing;
}
