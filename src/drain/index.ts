/**
 * The runtime that runs jobs: the handler API, the drain (one bounded run,
 * as `scheduled()` does it), and the built-in job types. Runtime-agnostic:
 * no Workers APIs, no HTTP server, only the engine and `fetch`.
 */
export { defineJob, type Backoff, type JobContext, type JobDefinition, type JobHandler, type JobOptions } from './define-job';
export { AttemptInterrupted, InvalidPayload, PermanentFailure, RetryAfter, type Interruption } from './job-errors';
export { createRegistry, type JobRegistry } from './registry';
export { definePeriodicJob, type PeriodicJob } from './periodic';
export { drainOnce, type DrainCounts, type DrainOptions } from './drain-once';
export { MAX_RESULT_BYTES } from './job-result';
export { jsonConsoleLogger, type Logger } from './logger';
export { builtInJobs } from './handlers/built-in';
export { httpJob, type HttpJobPayload, type HttpJobSettings } from './handlers/http';
export { verifySignature, SIGNATURE_HEADER } from './handlers/http-signature';
export { demoJobs, failJob, noopJob, sleepJob } from './handlers/demo';
