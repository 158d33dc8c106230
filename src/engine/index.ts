/**
 * The queue engine: every operation is one SQL statement over the `Queryable`
 * / `Db` interface of src/db, so it runs the same over Neon HTTP, Neon
 * WebSocket, node-postgres, Hyperdrive, or a caller's own transaction.
 */
export {
  FINAL_STATUSES,
  JOB_STATUSES,
  type AttemptTiming,
  type ClaimedJob,
  type CloudflareQueueTarget,
  type DeliveryTarget,
  type Job,
  type JobEvent,
  type JobEventKind,
  type JobStatus,
  type Json,
  type Lease,
  type WebhookTarget,
} from './types.js';
export { DedupConflictError, EngineError, InvalidInputError, StaleLeaseError } from './errors.js';
export {
  enqueue,
  enqueueBatch,
  enqueueQuery,
  MAX_BATCH,
  MAX_CALLBACK_URL_LENGTH,
  MAX_KEY_LENGTH,
  MAX_RATE_LIMIT,
  MAX_RATE_PERIOD_SECONDS,
  type DedupOnConflict,
  type DedupScope,
  type EnqueueInput,
  type JobKeys,
  type OrderingOnFailure,
  type RateOnExcess,
  type EnqueueResult,
  type TypedEnqueueOptions,
} from './enqueue.js';
export type { JobType, PayloadIssue, PayloadOf, ResultOf } from './job-type.js';
export {
  jobHandle,
  type EnqueueOutcome,
  JobGoneError,
  JobNotSucceededError,
  JobWaitTimeoutError,
  type JobHandle,
  type ResultOptions,
} from './job-handle.js';
export { claimBatch, MAX_CLAIM, prepareClaims, type ClaimOptions } from './claim-batch.js';
export { extendLease, type ExtendLeaseOptions, type ExtendedLease } from './extend-lease.js';
export { complete, completeMany, type Completion, type CompleteManyResult } from './complete.js';
export { fail, failMany, type Failure, type FailManyResult, type FailOutcome } from './fail.js';
export { release, releaseMany, type ReleaseManyResult, type ReleaseOptions } from './release.js';
export { reapExpiredLeases, releaseWorker, type ReclaimOptions, type ReleaseWorkerOptions } from './reclaim.js';
export { expireJobs, releaseLapsedDedupKeys } from './expire-jobs.js';
export { cancel, type CancelOutcome, type CancelResult } from './cancel.js';
export { retry, type RetryResult } from './retry.js';
export { reschedule, type RescheduleChange, type RescheduleOutcome, type RescheduleResult } from './reschedule.js';
export {
  BULK_ACTIONS,
  bulkAction,
  DEFAULT_BULK_BATCH,
  MAX_BULK_BATCH,
  MAX_BULK_LIMIT,
  type BulkActionName,
  type BulkActionRequest,
  type BulkActionResult,
} from './bulk-action.js';
export { MAX_BULK_IDS, type BulkFilter } from './bulk-filter.js';
export { MAX_TAGS, parsePayloadMatch, TAG_PATTERN, TAG_SYNTAX } from './tags.js';
export {
  getJob,
  getJobEvents,
  listJobs,
  MAX_ERROR_SEARCH,
  MAX_PAGE,
  type JobPage,
  type ListJobsOptions,
  type TenantScope,
} from './read-jobs.js';
export { queueStats, type HeldCounts, type QueueStatsRow } from './stats.js';
export {
  attemptTimings,
  TIMING_WINDOWS,
  type AttemptTimingsRow,
  type Percentiles,
  type TimingWindow,
} from './attempt-timings.js';
export {
  dailyAttemptStats,
  MAX_STATS_DAYS,
  rollUpAttemptStats,
  type AttemptStatsRollup,
  type DailyAttemptStats,
} from './attempt-stats.js';
export { queueHealth, REAPED_WINDOW_SECONDS, type QueueHealth, type TableDeadTuples } from './health.js';
export { throughputLastHour, type ThroughputRow } from './throughput.js';
export {
  compactJobCounts,
  METRIC_BUCKET_BOUNDS_SECONDS,
  queueMetrics,
  type JobCountsCompaction,
  type MetricHistogram,
  type Metrics,
  type QueueMetrics,
} from './metrics.js';
export {
  getTenant,
  setTenant,
  setTenantDefaults,
  type RateLimit,
  type Tenant,
  type TenantSettings,
} from './tenants.js';
export {
  getQueue,
  listQueueSettings,
  pauseQueue,
  resumeQueue,
  setQueue,
  MAX_QUEUE_RATE_LIMIT,
  MAX_QUEUE_RATE_SECONDS,
  type Queue,
  type QueueRateLimit,
  type QueueSettings,
} from './queue-settings.js';
export {
  listKeys,
  unblockKey,
  type ConcurrencyKey,
  type ConcurrencyKeyPage,
  type ListKeysOptions,
} from './concurrency-keys.js';
export { maintainHistory, pruneEvents, type HistoryMaintenance, type RetentionOptions } from './prune.js';
export {
  handBackJobTypeRetention,
  listJobTypeRetentions,
  setJobTypeRetention,
  type JobTypeRetention,
  type Retention,
} from './retention.js';
export { refreshStatistics } from './refresh-statistics.js';
export {
  MAX_TRACESTATE_LENGTH,
  parseTraceparent,
  traceparentProblem,
  tracestateProblem,
  type TraceContext,
} from './trace-context.js';
export {
  inEnqueueSpan,
  openTelemetry,
  type OpenTelemetryApi,
  type OpenTelemetryOptions,
  type OtelSpan,
  type OtelSpanContext,
  type OtelTracer,
  type SpanAttributes,
  type SpanKind,
  type SpanOptions,
  type TracedSpan,
  type Tracing,
} from './tracing.js';
export {
  getJobSteps,
  MAX_WAIT_SECONDS,
  type JobStep,
  type JobSteps,
  type StepKind,
} from './steps.js';
export {
  DEFAULT_EVENT_KEEP_SECONDS,
  MAX_EVENT_KEEP_SECONDS,
  sendEvent,
  sendEventQuery,
  type SendEventInput,
  type SentEvent,
} from './events.js';
export {
  enqueueFlow,
  type DependencyEnd,
  type FlowDependency,
  type FlowInput,
  type FlowJob,
  type OnDependencyFailure,
} from './flows.js';
export {
  acknowledge,
  MAX_ACKNOWLEDGEMENTS,
  type AcknowledgeResult,
  type Acknowledgements,
} from './acknowledge.js';
