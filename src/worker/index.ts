/**
 * `skiplock/worker`: the Cloudflare Workers factory. Your jobs, your
 * settings, one default export:
 *
 *   export default createSkiplock({ jobs: [sendWelcome], schedules: [nightly] });
 */
export { createSkiplock, type ScheduledEvent, type Skiplock, type SkiplockOptions } from './create-skiplock.js';
export { ConfigurationError } from './configuration-error.js';
export type { SkiplockSettings } from './settings.js';
export type { SkiplockEnv } from './env.js';
export { SkiplockClock, type ClockNamespace } from './queue-clock.js';
export type { DrainerState, SkiplockDrainer, SkiplockDrainerClass } from './drainer.js';
export type { DrainerNamespace } from './fan-out.js';
export {
  defineBatchJob,
  defineCloudflareQueueDelivery,
  defineJob,
  definePeriodicJob,
  defineWebhookDelivery,
  InvalidStepError,
  PermanentError,
  RetryAfterError,
  StepFailedError,
  type DeliveredJob,
  type NamedPeriodicJob,
  type PeriodicJob,
  type TypedPeriodicJob,
} from '../drain/index.js';
