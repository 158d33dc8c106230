import type { z } from '@hono/zod-openapi';
import type { Job, JobSteps, JobType, Json } from '../engine/index.js';
import type { JobStatusViewSchema } from './schemas/job.js';

/** What a status token (a statusUrl in a browser) shows of a job. */
export type JobStatusView = z.output<typeof JobStatusViewSchema>;

/** The longest progress message the default view shows. */
const MAX_MESSAGE_CHARACTERS = 200;

/**
 * A job as its status token shows it: its id, status, attempts and times,
 * and what its job type publishes of its progress and result. Never its
 * payload (an `http` job's may carry its target's credentials), result or
 * errors unless published, tenant, queue, worker or dedup key.
 */
export function statusViewOf(
  job: Job,
  jobType: JobType | undefined,
  waits: JobSteps['waitingFor'] = [],
): JobStatusView {
  return {
    id: job.id,
    status: job.status,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    createdAt: job.createdAt,
    runAt: job.runAt,
    startedAt: job.startedAt,
    finishedAt: job.finishedAt,
    progress: published(jobType?.publicProgress ?? defaultPublicProgress, job.progress),
    result:
      jobType?.publicResult === undefined || job.result === null ? null : published(jobType.publicResult, job.result),
    waitingFor: publicWait(waits),
  };
}

const WAIT_KINDS = {
  sleep: 'time',
  event: 'event',
  child: 'children',
  dependency: 'dependencies',
  key: 'turn',
  debounce: 'time',
} as const;

/** What a parked or held job waits for, as a browser may see it: its kind and time only. */
function publicWait(waits: JobSteps['waitingFor']): JobStatusView['waitingFor'] {
  const [wait] = waits;
  if (wait === undefined) return null;
  const until =
    wait.kind === 'sleep' || wait.kind === 'debounce' ? wait.until : wait.kind === 'event' ? wait.timeoutAt : null;
  return { for: WAIT_KINDS[wait.kind], until };
}

/**
 * What a job type's own function makes of a value: a function that throws,
 * or gives back something that is not JSON, shows nothing rather than
 * failing the status page.
 */
function published(publish: (value: Json) => Json, value: Json): Json {
  try {
    const shown = publish(value);
    return shown === undefined ? null : (JSON.parse(JSON.stringify(shown)) as Json);
  } catch {
    return null;
  }
}

/**
 * The progress the status page has always shown: a percentage saved as
 * `progress(40)`, or the `percent` and `message` of `{ percent, message, ... }`.
 * Anything else a handler saves (a cursor to resume from) stays private.
 */
function defaultPublicProgress(progress: Json): Json {
  const fields = typeof progress === 'object' && progress !== null && !Array.isArray(progress) ? progress : {};
  const percent = typeof progress === 'number' ? progress : fields.percent;
  const shown = {
    percent: typeof percent === 'number' && percent >= 0 && percent <= 100 ? percent : null,
    message: typeof fields.message === 'string' ? fields.message.slice(0, MAX_MESSAGE_CHARACTERS) : null,
  };
  return shown.percent === null && shown.message === null ? null : shown;
}
