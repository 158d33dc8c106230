import type { z } from 'zod';
import { defineBatchJob, type BatchJobOptions, type BatchOutcome } from '../define-batch-job.js';
import type { JobDefinition } from '../define-job.js';
import { PermanentError } from '../job-errors.js';
import { deliveredJobs, type DeliveredJob } from './delivered-job.js';
import { inDeliverySpan, tracingOf } from './delivery-span.js';

/** One message as a Cloudflare Queues producer takes it (`MessageSendRequest`). */
export interface QueueMessage {
  body: unknown;
  contentType?: 'json';
  delaySeconds?: number;
}

/** What skiplock needs of a Cloudflare Queues producer binding: `env.MY_QUEUE` fits. */
export interface QueueProducer {
  sendBatch(messages: Iterable<QueueMessage>): Promise<unknown>;
}

export interface CloudflareQueueDeliveryOptions<Payload> extends BatchJobOptions<CloudflareQueueDeliveryResult> {
  /**
   * The producer binding. A function is called for each batch, so a Worker
   * can hand over its binding from `env` (`import { env } from 'cloudflare:workers'`).
   */
  queue: QueueProducer | (() => QueueProducer);
  /** Seconds the queue holds a job's message before its consumer sees it (0 to 43,200); none when left out. */
  delaySeconds?: (job: DeliveredJob<Payload>) => number | undefined;
}

/** A delivered job's result: how many messages went in its `sendBatch` call. */
export interface CloudflareQueueDeliveryResult {
  sentWith: number;
}

/** Cloudflare Queues' limits on one `sendBatch`, and on a message. */
export const QUEUE_LIMITS = {
  messagesPerBatch: 100,
  bytesPerBatch: 256 * 1024,
  bytesPerMessage: 128 * 1024,
  maxDelaySeconds: 43_200,
};

const encoder = new TextEncoder();

/**
 * Defines a job type whose jobs are moved into a Cloudflare queue: each
 * batch (default 100 jobs) goes in `sendBatch` calls that keep within the
 * queue's limits (100 messages and 256 KB a call), in enqueue order, each
 * message a `DeliveredJob` as JSON. The jobs of a call that succeeds
 * complete together; those of a call that fails retry with backoff, the rest
 * stay delivered. A job whose message is over 128 KB fails for good. The
 * consumer sees each job at least once (`id` is the same every time):
 * Cloudflare Queues does not keep order, and a drain that dies after
 * `sendBatch` and before the completions commit sends the job again.
 */
export function defineCloudflareQueueDelivery<const Type extends string, Schema extends z.ZodType>(
  type: Type,
  schema: Schema,
  options: CloudflareQueueDeliveryOptions<z.output<Schema>>,
): JobDefinition<Type, z.input<Schema>, CloudflareQueueDeliveryResult> {
  const { queue, delaySeconds, ...batchOptions } = options;
  const producer = typeof queue === 'function' ? queue : () => queue;

  return defineBatchJob(
    type,
    schema,
    async (items) => {
      const outcomes = new Map<string, BatchOutcome<CloudflareQueueDeliveryResult>>();
      const calls: Array<Array<{ job: DeliveredJob; message: QueueMessage }>> = [];
      let call: Array<{ job: DeliveredJob; message: QueueMessage }> = [];
      let callBytes = 0;
      for (const job of deliveredJobs(items)) {
        const delay = delaySeconds?.(job);
        if (delay !== undefined && !(Number.isFinite(delay) && delay >= 0 && delay <= QUEUE_LIMITS.maxDelaySeconds)) {
          outcomes.set(job.id, {
            error: new PermanentError(`delaySeconds must be from 0 to ${QUEUE_LIMITS.maxDelaySeconds}, not ${delay}`),
          });
          continue;
        }
        const bytes = encoder.encode(JSON.stringify(job)).byteLength;
        if (bytes > QUEUE_LIMITS.bytesPerMessage) {
          outcomes.set(job.id, {
            error: new PermanentError(
              `the job is ${bytes} bytes as a message; a Cloudflare queue takes up to ${QUEUE_LIMITS.bytesPerMessage}`,
            ),
          });
          continue;
        }
        if (call.length === QUEUE_LIMITS.messagesPerBatch || callBytes + bytes > QUEUE_LIMITS.bytesPerBatch) {
          calls.push(call);
          call = [];
          callBytes = 0;
        }
        call.push({
          job,
          message: {
            body: job,
            contentType: 'json',
            ...(delay === undefined ? {} : { delaySeconds: Math.round(delay) }),
          },
        });
        callBytes += bytes;
      }
      if (call.length > 0) calls.push(call);

      // One call after another, so the queue receives them in enqueue order.
      const tracing = tracingOf(items);
      for (const sent of calls) {
        try {
          const delivery = { jobs: sent.map((entry) => entry.job), target: 'cloudflare-queue' } as const;
          await inDeliverySpan(tracing, delivery, () => producer().sendBatch(sent.map((entry) => entry.message)));
          for (const { job } of sent) outcomes.set(job.id, { result: { sentWith: sent.length } });
        } catch (error) {
          const failure = new Error(`sendBatch failed: ${error instanceof Error ? error.message : String(error)}`);
          for (const { job } of sent) outcomes.set(job.id, { error: failure });
        }
      }
      return outcomes;
    },
    { ...batchOptions, subrequests: batchOptions.subrequests ?? 1 },
  );
}
