import type { JobStatus } from '../engine/index.js';
import { sha256Hex } from './auth/crypto.js';

/** What a caller sees of a job: the whole job (an API key) or its status view (a status token). */
export interface JobRepresentation {
  status: JobStatus;
}

/** A job as one read saw it, with the ETag of that representation. */
export interface JobVersion<J extends JobRepresentation> {
  job: J;
  etag: string;
}

/**
 * How often a long-poll or an event stream reads the job again. Neon's HTTP
 * driver has no LISTEN, so watching is polling; each read is one subrequest,
 * which keeps a 30 s long-poll inside the free plan's 50.
 */
export const POLL_INTERVAL_MS = 1000;

/** A strong ETag: the job's JSON is the whole representation, so equal JSON is an equal response. */
async function versionOf<J extends JobRepresentation>(job: J): Promise<JobVersion<J>> {
  return { job, etag: `"${(await sha256Hex(JSON.stringify(job))).slice(0, 32)}"` };
}

/** RFC 9110 If-None-Match: `*`, or a list of tags compared weakly (a `W/` prefix does not matter). */
export function matchesIfNoneMatch(ifNoneMatch: string, etag: string): boolean {
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/**
 * Reads the job now and then every POLL_INTERVAL_MS, `reads` times in all,
 * yielding each read; undefined means the job is gone (or was never visible),
 * and ends the polling. Callers stop early by leaving their loop.
 */
export async function* pollJob<J extends JobRepresentation>(
  read: () => Promise<J | undefined>,
  reads: number,
): AsyncGenerator<JobVersion<J> | undefined> {
  for (let done = 0; done < reads; done++) {
    if (done > 0) await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
    const job = await read();
    yield job && (await versionOf(job));
    if (job === undefined) return;
  }
}
