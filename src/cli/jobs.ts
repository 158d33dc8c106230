import {
  JobWaitTimeoutError,
  SkiplockApiError,
  successBody,
  type ClientJobHandle,
  type Job,
  type JobStatus,
  type JobSteps,
} from '../http/client.js';
import { bulk } from './bulk.js';
import { CliError, EXIT, usageFailure } from './cli-failure.js';
import { describeSteps } from './job-steps.js';
import { liveStatusLine } from './live-status-line.js';
import { operatorCommand, withSubcommands, type Answer } from './operator-command.js';
import { compactJson, duration, fields, shortTime, table } from './table.js';

const list = operatorCommand({
  usage:
    'skiplock jobs list [--queue Q] [--tenant T] [--status S] [--type T] [--tag TAG]... ' +
    "[--payload '{...}'] [--error TEXT] [--limit N] [--cursor C]",
  options: {
    queue: { type: 'string' },
    tenant: { type: 'string' },
    status: { type: 'string' },
    type: { type: 'string' },
    tag: { type: 'string', multiple: true },
    payload: { type: 'string' },
    error: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
  },
  async run({ values: { queue, tenant, status, type, tag, payload, error, limit, cursor }, connection }) {
    // The API checks the status, the tags and the payload match, and names what is wrong.
    const query = { queue, tenant, status: status as JobStatus | undefined, type, tag, payload, error, limit, cursor };
    const page = await successBody(connection.api.v1.jobs.$get({ query }));
    const rows = page.jobs.map((job) => [
      job.id,
      job.queue,
      job.type,
      job.tenant,
      job.status,
      `${job.attempts}/${job.maxAttempts}`,
      shortTime(job.createdAt),
      job.tags.join(' '),
    ]);
    const lines = [
      page.jobs.length === 0
        ? 'no jobs'
        : table(['id', 'queue', 'type', 'tenant', 'status', 'attempts', 'created', 'tags'], rows),
    ];
    if (page.nextCursor !== null) lines.push(`more: add --cursor ${page.nextCursor}`);
    return { json: page, human: lines.join('\n') };
  },
});

const get = operatorCommand({
  usage: 'skiplock jobs get JOB_ID [--wait [--timeout SECONDS]]',
  options: { wait: { type: 'boolean', default: false }, timeout: { type: 'string' } },
  positionals: ['JOB_ID'],
  async run({ values, positionals: [id], connection }) {
    const handle = connection.jobs.job(id!);
    if (!values.wait) {
      if (values.timeout !== undefined) throw usageFailure('--timeout goes with --wait');
      return withSteps(handle, await handle.status());
    }
    const timeoutMs = values.timeout === undefined ? undefined : seconds(values.timeout, '--timeout') * 1000;
    const line = liveStatusLine(process.stderr);
    let job: Job;
    try {
      job = await handle.ended({ timeoutMs, onChange: (changed) => line.show(changed) });
    } catch (error) {
      if (!(error instanceof JobWaitTimeoutError)) throw error;
      const failure = new CliError(`job ${id} is still ${error.job.status} after ${values.timeout} s`, EXIT.timedOut);
      return { ...(await withSteps(handle, error.job)), failure };
    } finally {
      line.end();
    }
    return {
      ...(await withSteps(handle, job)),
      ...(job.status === 'succeeded' ? {} : { failure: notSucceeded(job) }),
    };
  },
});

/**
 * The job with its durable steps, what it waits for and its linked jobs,
 * read after it: `--json` has them under `steps`. An API older than the
 * steps route (404 for a job just read) shows the job alone.
 */
async function withSteps(handle: ClientJobHandle, job: Job): Promise<Answer> {
  let steps: JobSteps | undefined;
  try {
    steps = await handle.steps();
  } catch (error) {
    if (!(error instanceof SkiplockApiError && error.status === 404)) throw error;
  }
  const described = steps === undefined ? '' : describeSteps(steps);
  return {
    json: steps === undefined ? job : { ...job, steps },
    human: described === '' ? describeJob(job) : `${describeJob(job)}\n\n${described}`,
  };
}

const retry = operatorCommand({
  usage: 'skiplock jobs retry JOB_ID',
  options: {},
  positionals: ['JOB_ID'],
  async run({ positionals: [id], connection }) {
    const job = await successBody(connection.api.v1.jobs[':id'].retry.$post({ param: { id: id! } }));
    // A key without the read scope gets the job's id and status only.
    const attempts =
      'maxAttempts' in job ? `, with ${job.maxAttempts} fresh attempt${job.maxAttempts === 1 ? '' : 's'}` : '';
    return { json: job, human: `job ${job.id} is queued again${attempts}` };
  },
});

const reschedule = operatorCommand({
  usage: 'skiplock jobs reschedule JOB_ID [--priority N] [--run-at TIME | --delay SECONDS]',
  options: { priority: { type: 'string' }, 'run-at': { type: 'string' }, delay: { type: 'string' } },
  positionals: ['JOB_ID'],
  async run({ values, positionals: [id], connection }) {
    const { priority, 'run-at': runAt, delay } = values;
    if (priority === undefined && runAt === undefined && delay === undefined) {
      throw usageFailure('give --priority, --run-at or --delay');
    }
    if (runAt !== undefined && delay !== undefined) throw usageFailure('give --run-at or --delay, not both');
    // The API checks the ranges and the time, and names what is wrong.
    const json = {
      ...(priority === undefined ? {} : { priority: integer(priority, '--priority') }),
      ...(runAt === undefined ? {} : { runAt }),
      ...(delay === undefined ? {} : { delaySeconds: seconds(delay, '--delay', { zero: true }) }),
    };
    const job = await successBody(connection.api.v1.jobs[':id'].$patch({ param: { id: id! }, json }));
    const when = 'priority' in job ? `, priority ${job.priority}, to run at ${shortTime(job.runAt)}` : '';
    return { json: job, human: `job ${job.id} is ${job.status}${when}` };
  },
});

const cancel = operatorCommand({
  usage: 'skiplock jobs cancel JOB_ID',
  options: {},
  positionals: ['JOB_ID'],
  async run({ positionals: [id], connection }): Promise<Answer> {
    const job = await connection.jobs.job(id!).cancel();
    const human =
      job.status === 'cancelled'
        ? `job ${job.id} is cancelled`
        : `job ${job.id} is ${job.status}: its cancellation is requested, and its handler sees it at its next heartbeat`;
    return { json: job, human };
  },
});

export const jobsCommand = withSubcommands('jobs', {
  list: {
    run: list,
    summary:
      'jobs, newest first, filtered by --queue, --tenant, --status, --type, --tag, --payload, --error; --cursor pages',
  },
  get: {
    run: get,
    summary: 'one job, with its durable steps and what it waits for; --wait follows it until it ends',
  },
  retry: { run: retry, summary: 'run a failed, cancelled or expired job again' },
  reschedule: { run: reschedule, summary: "change a waiting job's --priority or start time (--run-at or --delay)" },
  cancel: { run: cancel, summary: 'cancel a job (a running one at its next heartbeat)' },
  bulk: {
    run: bulk,
    summary:
      'retry, cancel, reschedule, delete or redrive every job matching --queue, --tenant, --type, --status, times, --tag, ' +
      '--payload; --dry-run counts',
  },
});

/** A job as label and value lines. */
export function describeJob(job: Job): string {
  return fields([
    ['id', job.id],
    ['status', job.cancelRequested && job.status === 'running' ? 'running (cancellation requested)' : job.status],
    ['queue', job.queue],
    ['type', job.type],
    ['tenant', job.tenant],
    ['priority', String(job.priority)],
    ['attempts', `${job.attempts} of ${job.maxAttempts}`],
    ['run at', shortTime(job.runAt)],
    ['created', shortTime(job.createdAt)],
    ['started', shortTime(job.startedAt)],
    ['finished', shortTime(job.finishedAt)],
    ['duration', job.durationMs === null ? '-' : duration(job.durationMs / 1000)],
    ['worker', job.workerId ?? '-'],
    ['payload', compactJson(job.payload)],
    ['progress', compactJson(job.progress)],
    ['result', compactJson(job.result)],
    ['last error', compactJson(job.lastError)],
  ]);
}

function notSucceeded(job: Job): CliError {
  const error = job.lastError === null ? '' : `: ${compactJson(job.lastError)}`;
  return new CliError(`job ${job.id} ended ${job.status}${error}`, EXIT.jobNotSucceeded);
}

function seconds(value: string, flag: string, { zero = false } = {}): number {
  const parsed = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || parsed < 0 || (parsed === 0 && !zero)) {
    throw usageFailure(`${flag} must be a number of seconds ${zero ? 'from 0' : 'above 0'}, not "${value}"`);
  }
  return parsed;
}

function integer(value: string, flag: string): number {
  if (!/^-?\d+$/.test(value)) throw usageFailure(`${flag} must be a whole number, not "${value}"`);
  return Number(value);
}
