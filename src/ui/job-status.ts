import type { JobStatus } from '../engine/index.js';

/** How a status reads on the pages; the pages' scripts use the same (browser/shared.ts). */
export const STATUS_LABELS: Record<JobStatus, string> = {
  scheduled: 'Scheduled',
  queued: 'Queued',
  running: 'Running',
  retrying: 'Retrying',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
  expired: 'Expired',
};
