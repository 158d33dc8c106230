/**
 * `skiplock/drain`: what your job types are made of, wherever they run. The
 * handler API (job types, batch job types, periodic jobs, the errors that
 * steer a job), the built-in `http` job and the receiver's secret for its
 * signatures, and the bulk deliveries. Runtime-agnostic: no Workers APIs,
 * no HTTP server. The runtimes that run these are `skiplock/worker` and
 * `skiplock/node-worker`.
 */
export {
  defineJob,
  type Backoff,
  type JobContext,
  type JobDefinition,
  type JobHandler,
  type JobOptions,
} from './define-job.js';
export {
  defineBatchJob,
  type BatchContext,
  type BatchItem,
  type BatchJobHandler,
  type BatchJobOptions,
  type BatchOutcome,
  type BatchOutcomes,
} from './define-batch-job.js';
export {
  definePeriodicJob,
  type NamedPeriodicJob,
  type PeriodicJob,
  type TypedPeriodicJob,
} from './periodic.js';
export {
  AttemptInterruptedError,
  InvalidBatchOutcomeError,
  InvalidPayloadError,
  InvalidStepError,
  PermanentError,
  RetryAfterError,
  StepFailedError,
  type Interruption,
} from './job-errors.js';
export type {
  ChildEnd,
  Duration,
  ReceivedEvent,
  StepOptions,
  Steps,
  WaitForEventOptions,
} from './steps.js';
export type { DependencyEnd } from '../engine/flows.js';
export { MAX_RESULT_BYTES } from './job-result.js';
export type { LogFields, Logger } from './logger.js';
export type { DeliveredJob } from './bulk-delivery/delivered-job.js';
export {
  defineWebhookDelivery,
  type WebhookDeliveryOptions,
  type WebhookDeliveryResult,
} from './bulk-delivery/webhook.js';
export {
  defineCloudflareQueueDelivery,
  type CloudflareQueueDeliveryOptions,
  type CloudflareQueueDeliveryResult,
  type QueueMessage,
  type QueueProducer,
} from './bulk-delivery/cloudflare-queue.js';
export {
  QueueDeliveries,
  type DeliveryProblem,
  type QueueDeliveriesOptions,
} from './bulk-delivery/queue-deliveries.js';
export { builtInJobs, type BuiltInJobSettings } from './handlers/built-in.js';
export type { JobSettings } from './settings.js';
export {
  httpJob,
  type DeliveryFetch,
  type DeliveryRequest,
  type HttpJobPayload,
  type HttpJobSettings,
} from './handlers/http.js';
export { httpEndpointSecret } from './handlers/http-signature.js';
