import type { z } from '@hono/zod-openapi';
import type { AttemptTimingsSchema, DailyAttemptStatsSchema } from '../../../http/schemas/attempt-stats.js';
import type { BulkActionBodySchema, BulkActionResultSchema, BulkFilterSchema } from '../../../http/schemas/bulk.js';
import type { JobHistorySchema } from '../../../http/schemas/job-history.js';
import type { JobPageSchema, JobSchema } from '../../../http/schemas/job.js';
import type { JobStepsSchema } from '../../../http/schemas/steps.js';
import type { QueueListSchema, StatsResponseSchema } from '../../../http/schemas/stats.js';
import type { TenantSchema, TenantSettingsBodySchema } from '../../../http/schemas/tenant.js';
import type { ThroughputSchema } from '../../../http/schemas/throughput.js';

/*
 * The API's bodies that the dashboard reads and sends, as the server's zod
 * schemas define them: a change there that the dashboard does not follow
 * fails the typecheck. Types only, so nothing of zod reaches the bundle.
 */

export type QueueList = z.output<typeof QueueListSchema>;
export type QueueSummary = QueueList['queues'][number];
export type Stats = z.output<typeof StatsResponseSchema>;
export type Throughput = z.output<typeof ThroughputSchema>;
export type ThroughputRow = Throughput['throughput'][number];
export type AttemptTimings = z.output<typeof AttemptTimingsSchema>;
export type DailyAttemptStats = z.output<typeof DailyAttemptStatsSchema>;
export type Job = z.output<typeof JobSchema>;
export type JobPage = z.output<typeof JobPageSchema>;
export type JobHistory = z.output<typeof JobHistorySchema>;
export type JobSteps = z.output<typeof JobStepsSchema>;
export type Tenant = z.output<typeof TenantSchema>;
/** What PUT /v1/tenants/{tenant} takes (every field given: the form sends them all). */
export type TenantSettings = Required<z.input<typeof TenantSettingsBodySchema>>;
/** What POST /v1/jobs/bulk takes and answers. */
export type BulkActionRequest = z.input<typeof BulkActionBodySchema>;
export type BulkFilter = z.input<typeof BulkFilterSchema>;
export type BulkActionResult = z.output<typeof BulkActionResultSchema>;
