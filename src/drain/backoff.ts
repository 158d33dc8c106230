import type { Backoff } from './define-job.js';

/**
 * Seconds to wait before retrying after `attempt` failed: full jitter, a
 * uniform draw from 0 to min(max, base * 2^(attempt-1)), the rule the engine
 * applies to a job's own backoff, so retries of many failed jobs spread out.
 */
export function retryDelaySeconds(backoff: Backoff, attempt: number, random: () => number = Math.random): number {
  return random() * Math.min(backoff.maxSeconds, backoff.baseSeconds * 2 ** (attempt - 1));
}
