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
}

/** A job handed out by a claim, with the fencing token its worker must present. */
export interface ClaimedJob extends Job {
  leaseToken: string;
}

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
