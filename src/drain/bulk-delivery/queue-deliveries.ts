import { z } from 'zod';
import { DELIVERY_QUEUE_PREFIX, DELIVERY_SECRET_PREFIX, type DeliveryTarget } from '../../engine/types.js';
import { defineJob, type JobDefinition } from '../define-job.js';
import { destinationProblem, parseAllowedHosts, type AllowedHost } from '../handlers/http-destination.js';
import type { HttpJobSettings } from '../handlers/http.js';
import { defineCloudflareQueueDelivery, type QueueProducer } from './cloudflare-queue.js';
import { defineWebhookDelivery } from './webhook.js';

export interface QueueDeliveriesOptions {
  /** The built-in `http` job's settings: a queue's webhook keeps to its HTTP_ALLOWED_HOSTS and sends with its fetch. */
  http: Pick<HttpJobSettings, 'allowedHosts' | 'fetch'>;
  /** A secret by name (a Worker's `env`, `process.env`): webhook targets name theirs, never hold it. */
  secret(name: string): string | undefined;
  /** The Queues producer binding of that name; without this function the runtime has none (Node). */
  producer?(binding: string): QueueProducer | undefined;
}

/** What is wrong with a delivery target where this runtime would deliver, and which of its fields says so. */
export interface DeliveryProblem {
  field: string;
  detail: string;
}

/** A DELIVERY_SECRET_… signs; receivers get secrets derived from it, so it must be hard to guess. */
const MIN_SIGNING_SECRET_LENGTH = 32;

/** Definitions kept per isolate before the oldest is dropped (a queue's target rarely changes). */
const KEPT_DEFINITIONS = 256;

/**
 * The delivery targets one runtime can deliver a queue's jobs to, set per
 * queue over the API (`skiplock.queues.delivery`, returned with each job the
 * claim takes). A drain that has these claims those queues' jobs, of any
 * type, and runs each through the batch definition of its queue's target:
 * a batched, signed webhook (`defineWebhookDelivery`) or a Cloudflare queue
 * (`defineCloudflareQueueDelivery`). Kept per target, so the jobs of one
 * queue that start together share batches, as a code-defined delivery's do.
 */
export class QueueDeliveries {
  readonly targets: ReadonlyArray<DeliveryTarget['target']>;
  private readonly allowedHosts: readonly AllowedHost[];
  private readonly definitions = new Map<string, JobDefinition>();

  constructor(private readonly options: QueueDeliveriesOptions) {
    this.allowedHosts = parseAllowedHosts(options.http.allowedHosts);
    this.targets = options.producer === undefined ? ['webhook'] : ['webhook', 'cloudflare-queue'];
  }

  /** Why this runtime could not deliver to `delivery` (the API refuses it), or undefined. */
  problemWith(delivery: DeliveryTarget): DeliveryProblem | undefined {
    if (delivery.target === 'webhook') {
      let url: URL;
      try {
        url = new URL(delivery.url);
      } catch {
        return { field: 'url', detail: `"${delivery.url}" is not a URL` };
      }
      const refused = destinationProblem(url, undefined, this.allowedHosts);
      if (refused !== undefined) return { field: 'url', detail: refused };
      if (delivery.secretName === undefined) return undefined;
      if (!delivery.secretName.startsWith(DELIVERY_SECRET_PREFIX)) {
        return { field: 'secretName', detail: `must start with ${DELIVERY_SECRET_PREFIX}` };
      }
      const secret = this.options.secret(delivery.secretName);
      if (secret === undefined || secret === '')
        return { field: 'secretName', detail: `no secret named ${delivery.secretName} is set here` };
      if (secret.length < MIN_SIGNING_SECRET_LENGTH) {
        return {
          field: 'secretName',
          detail: `secret ${delivery.secretName} must be at least ${MIN_SIGNING_SECRET_LENGTH} characters`,
        };
      }
      return undefined;
    }
    if (this.options.producer === undefined)
      return { field: 'target', detail: 'only a Worker delivers to a Cloudflare queue' };
    if (!delivery.binding.startsWith(DELIVERY_QUEUE_PREFIX))
      return { field: 'binding', detail: `must start with ${DELIVERY_QUEUE_PREFIX}` };
    if (this.options.producer(delivery.binding) === undefined) {
      return { field: 'binding', detail: `this Worker has no Queues producer binding named ${delivery.binding}` };
    }
    return undefined;
  }

  /**
   * The definition that delivers `queue`'s jobs to `delivery`. A target this
   * runtime cannot deliver to (a binding removed, a host taken off the
   * allow-list, a secret this process lacks, a setting written in SQL that
   * is out of range) fails each attempt with the reason, as a handler that
   * throws would: the jobs retry with backoff until their attempts run out.
   */
  definitionFor(queue: string, delivery: DeliveryTarget): JobDefinition {
    const key = JSON.stringify([queue, delivery]);
    let definition = this.definitions.get(key);
    if (definition === undefined) {
      definition = this.define(queue, delivery);
      if (this.definitions.size >= KEPT_DEFINITIONS) this.definitions.delete(this.definitions.keys().next().value!);
      this.definitions.set(key, definition);
    }
    return definition;
  }

  private define(queue: string, delivery: DeliveryTarget): JobDefinition {
    const type = `queue ${queue}`;
    const problem = this.problemWith(delivery);
    if (problem !== undefined)
      return failing(type, `queue ${queue} delivers to ${delivery.target}, but ${problem.field}: ${problem.detail}`);
    try {
      return this.defineReachable(type, delivery);
    } catch (error) {
      return failing(
        type,
        `queue ${queue}'s delivery target is not valid: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  private defineReachable(type: string, delivery: DeliveryTarget): JobDefinition {
    const batchSize = delivery.batchSize;
    if (delivery.target === 'webhook') {
      const secret = delivery.secretName === undefined ? undefined : this.options.secret(delivery.secretName);
      // Each tenant's POSTs are signed for that tenant and this URL (httpEndpointSecret gives receivers theirs).
      return defineWebhookDelivery(type, z.unknown(), {
        url: delivery.url,
        ...(secret === undefined ? {} : { signingSecret: secret }),
        ...(batchSize === undefined ? {} : { batchSize }),
        ...(delivery.maxBatchBytes === undefined ? {} : { maxBatchBytes: delivery.maxBatchBytes }),
        ...(delivery.timeoutMs === undefined ? {} : { timeoutMs: delivery.timeoutMs }),
        ...(this.options.http.fetch === undefined ? {} : { fetch: this.options.http.fetch }),
      });
    }
    const { binding, delaySeconds } = delivery;
    const producer = this.options.producer!;
    return defineCloudflareQueueDelivery(type, z.unknown(), {
      queue: () => producer(binding)!,
      ...(batchSize === undefined ? {} : { batchSize }),
      ...(delaySeconds === undefined ? {} : { delaySeconds: () => delaySeconds }),
    });
  }
}

/** A definition whose every attempt fails with `reason`. */
function failing(type: string, reason: string): JobDefinition {
  return defineJob(type, z.unknown(), () => {
    throw new Error(reason);
  });
}
