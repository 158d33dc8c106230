/** The states a job shows (SPEC section 2). */
export const JOB_STATUSES = [
  'scheduled',
  'queued',
  'running',
  'retrying',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const FINAL_STATUSES: readonly JobStatus[] = ['succeeded', 'failed', 'cancelled', 'expired'];

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A job as the engine returns it (`skiplock.job_json()`, then `toJob`): camelCase, ISO-8601 UTC timestamps. */
export interface Job {
  id: string;
  queue: string;
  type: string;
  tenant: string;
  status: JobStatus;
  priority: number;
  payload: Json;
  attempts: number;
  maxAttempts: number;
  leaseSeconds: number;
  runAt: string;
  expiresAt: string | null;
  dedupKey: string | null;
  createdAt: string;
  firstStartedAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  leaseExpiresAt: string | null;
  workerId: string | null;
  cancelRequested: boolean;
  progress: Json;
  result: Json;
  lastError: Json;
  /** Where a success is announced (see `EnqueueInput.callbackUrl`). */
  callbackUrl: string | null;
  /** Where a failure, cancellation or expiry is announced. */
  failureCallbackUrl: string | null;
  /** How long its handler ran, summed over the attempts ended so far. */
  runMs: number;
  /** Its tags, given at enqueue and by its job definition; empty when none. */
  tags: string[];
}

/**
 * A job handed out by a claim, with the fencing token its worker must
 * present. Without its tags: a claim reads only what running the job needs.
 */
export interface ClaimedJob extends Omit<Job, 'tags'> {
  leaseToken: string;
  /**
   * Its queue's delivery target, when the claim named that target
   * (`ClaimOptions.deliveryTargets`): the job goes there, whatever its type.
   */
  delivery?: DeliveryTarget;
}

/**
 * Where a queue's jobs go instead of to the handlers of their types: a
 * batched, signed webhook, or a Cloudflare queue through a producer binding
 * (skiplock.queues.delivery; set with `setQueue`).
 */
export type DeliveryTarget = WebhookTarget | CloudflareQueueTarget;

export interface WebhookTarget {
  target: 'webhook';
  /** http or https, on HTTP_ALLOWED_HOSTS for every tenant. */
  url: string;
  /**
   * The name (DELIVERY_SECRET_…) of the Worker secret or environment variable
   * that signs the POSTs: each tenant's with an endpoint secret derived from
   * it for that tenant and this URL. Unsigned without it.
   */
  secretName?: string;
  /** Jobs per POST, 1 to 1,000; default 100. */
  batchSize?: number;
  /** Bytes of jobs per POST, 1,024 to 10,485,760; default 1,048,576. */
  maxBatchBytes?: number;
  /** How long the receiver may take to answer; default 10,000 ms. */
  timeoutMs?: number;
}

export interface CloudflareQueueTarget {
  target: 'cloudflare-queue';
  /** The name (DELIVERY_QUEUE_…) of the Worker's Queues producer binding. */
  binding: string;
  /** Jobs per drain batch, 1 to 1,000 (sent in calls of up to 100); default 100. */
  batchSize?: number;
  /** Seconds the queue holds each message before its consumer sees it, 0 to 43,200. */
  delaySeconds?: number;
}

/**
 * The names a target may give. The API reaches only secrets and bindings
 * named for it, so an admin key cannot sign with a secret kept for something
 * else, nor send into a queue the Worker binds for another purpose.
 */
export const DELIVERY_SECRET_PREFIX = 'DELIVERY_SECRET_';
export const DELIVERY_QUEUE_PREFIX = 'DELIVERY_QUEUE_';

/** Proof of ownership of a claimed job: every change by a worker carries it. */
export interface Lease {
  id: string;
  leaseToken: string;
}

/** What a worker that ends an attempt says of its timing. */
export interface AttemptTiming {
  /**
   * How long the worker held the claimed job before its handler started
   * (claimed ahead, waiting for a free slot), in milliseconds: the attempt
   * counts as started then, not at the claim. 0 when left out.
   */
  heldMs?: number;
}

export type JobEventKind =
  | 'enqueued'
  | 'claimed'
  | 'lease_extended'
  | 'completed'
  | 'failed'
  | 'retried'
  | 'released'
  | 'cancel_requested'
  | 'cancelled'
  | 'expired'
  | 'lease_expired'
  | 'rescheduled'
  | 'callback_enqueued'
  | 'parked'
  | 'resumed'
  | 'held'
  | 'debounced'
  | 'replaced'
  | 'callback_failed'
  | 'callback_cancelled'
  | 'callback_delivered';

export interface JobEvent {
  /** The stored event's id; null for an event read from the job's row (enqueued, claimed, completed). */
  id: number | null;
  jobId: string;
  at: string;
  kind: JobEventKind;
  attempt: number;
  workerId: string | null;
  detail: Json;
}
