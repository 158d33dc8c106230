/**
 * The runtime that runs jobs: the handler API, the drain (one bounded run,
 * as `scheduled()` does it), and the built-in job types. Runtime-agnostic:
 * no Workers APIs, no HTTP server, only the engine and `fetch`.
 */
export { defineJob, type Backoff, type JobContext, type JobDefinition, type JobHandler, type JobOptions } from './define-job.js';
export {
  defineBatchJob,
  type BatchContext,
  type BatchItem,
  type BatchJobHandler,
  type BatchJobOptions,
  type BatchOutcome,
  type BatchOutcomes,
} from './define-batch-job.js';
export type { DeliveredJob } from './bulk-delivery/delivered-job.js';
export {
  defineWebhookDelivery,
  type WebhookDeliveryOptions,
  type WebhookDeliveryResult,
} from './bulk-delivery/webhook.js';
export { QueueDeliveries, type DeliveryProblem, type QueueDeliveriesOptions } from './bulk-delivery/queue-deliveries.js';
export {
  defineCloudflareQueueDelivery,
  QUEUE_LIMITS,
  type CloudflareQueueDeliveryOptions,
  type CloudflareQueueDeliveryResult,
  type QueueMessage,
  type QueueProducer,
} from './bulk-delivery/cloudflare-queue.js';
export { AttemptInterruptedError, InvalidBatchOutcomeError, InvalidPayloadError, PermanentError, RetryAfterError, type Interruption } from './job-errors.js';
export { createRegistry, type JobRegistry, type RegistryOptions } from './registry.js';
export { definePeriodicJob, type PeriodicJob } from './periodic.js';
export { drainOnce, type DrainCounts, type DrainOptions } from './drain-once.js';
export { runUntilStopped, type RunningDrain, type RunUntilStoppedOptions } from './run-until-stopped.js';
export { CLAIMS_AHEAD_AT_ONCE } from './job-loop.js';
export { MAX_RESULT_BYTES } from './job-result.js';
export { sleep } from '../engine/sleep.js';
export { errorFields, jsonConsoleLogger, type Logger } from './logger.js';
export { jobSettings, SHARED_SETTINGS, type JobSettings, type SharedSettings } from './settings.js';
export {
  readSettings,
  setting,
  type DerivedDefault,
  type Setting,
  type SettingGroup,
  type SettingOptions,
  type SettingValues,
  type SettingVariables,
} from './setting.js';
export { list, number, oneOf, onOff, secondsAsMilliseconds, text, wholeNumber, type SettingKind } from './setting-kinds.js';
export { builtInJobs } from './handlers/built-in.js';
export { httpJob, type DeliveryFetch, type DeliveryRequest, type HttpJobPayload, type HttpJobSettings } from './handlers/http.js';
export { httpEndpointSecret, WEBHOOK_HEADERS } from './handlers/http-signature.js';
export { isPublicAddress } from './handlers/public-address.js';
export { isFramingHeader } from './handlers/framing-headers.js';
export { demoJobs, failJob, noopJob, sleepJob } from './handlers/demo.js';
