/**
 * The queue engine: every operation is one SQL statement over the `Queryable`
 * / `Db` interface of src/db, so it runs the same over Neon HTTP, Neon
 * WebSocket, node-postgres, Hyperdrive, or a caller's own transaction.
 */
export * from './types';
export * from './errors';
export { enqueue, enqueueBatch, enqueueQuery, MAX_BATCH, type EnqueueInput, type EnqueueResult } from './enqueue';
export { claimBatch, MAX_CLAIM, type ClaimOptions } from './claim-batch';
export { extendLease, type ExtendLeaseOptions, type ExtendedLease } from './extend-lease';
export { complete, completeMany, type Completion, type CompleteManyResult } from './complete';
export { fail, type Failure } from './fail';
export { release, releaseMany, type ReleaseManyResult, type ReleaseOptions } from './release';
export { reapExpiredLeases, releaseWorker, type ReclaimOptions } from './reclaim';
export { expireJobs, releaseLapsedDedupKeys } from './expire-jobs';
export { cancel, type CancelOutcome, type CancelResult } from './cancel';
export { retry, type RetryResult } from './retry';
export {
  getJob,
  getJobEvents,
  listJobs,
  MAX_PAGE,
  type JobPage,
  type ListJobsOptions,
  type TenantScope,
} from './read-jobs';
export { queueStats, type QueueStatsRow } from './stats';
export { queueHealth, REAPED_WINDOW_SECONDS, type QueueHealth, type TableDeadTuples } from './health';
export { throughputLastHour, type ThroughputRow } from './throughput';
export { getTenant, setTenant, setTenantDefaults, type RateLimit, type Tenant, type TenantSettings } from './tenants';
export { pruneFinishedJobs, type PruneOptions } from './prune';
export { refreshStatistics } from './refresh-statistics';
