import type { BatchItem } from '../define-batch-job.js';

/**
 * A job as a bulk delivery hands it on: a message of a Cloudflare queue, or
 * one entry of a batched webhook. `id` is the same on every attempt, so the
 * receiver drops repeats by it (delivery is at least once).
 */
export interface DeliveredJob<Payload = unknown> {
  id: string;
  type: string;
  queue: string;
  tenant: string;
  /** 1 on the first delivery; more after a failed or unacknowledged one. */
  attempt: number;
  createdAt: string;
  payload: Payload;
  /**
   * The W3C trace context of the attempt that delivers it (its `process`
   * span), when the drain traces, so a receiver continues each job's own
   * trace; left out when the drain does not trace.
   */
  traceparent?: string;
  /** The `tracestate` that goes with `traceparent`, when it has one. */
  tracestate?: string;
}

/** The batch's jobs as delivered, in enqueue order (ids are time-ordered), so each tenant's keep their order. */
export function deliveredJobs<Payload>(items: ReadonlyArray<BatchItem<Payload>>): Array<DeliveredJob<Payload>> {
  return items
    .map(({ id, payload, context }) => ({
      id,
      type: context.job.type,
      queue: context.job.queue,
      tenant: context.job.tenant,
      attempt: context.attempt,
      createdAt: context.job.createdAt,
      payload,
      ...context.traceContext,
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
