import type { JobStatus } from '../../../engine/types.js';
import { byId, formatTime, isFinal, setBadge } from '../../browser/shared.js';
import { api, problemMessage } from './api.js';
import type { Job, JobHistory, JobSteps } from './api-types.js';
import { confirmAction, showNotice } from './notice.js';
import { h } from './elements.js';
import { formatDuration, formatFromNow, formatJson } from './format.js';
import { jobLink } from './job-list.js';

/** One job and its history, with retry and cancel. */

type JobEvent = JobHistory['events'][number];

const RETRYABLE: readonly JobStatus[] = ['failed', 'cancelled', 'expired'];
const EVENT_LABELS: Record<JobEvent['kind'], string> = {
  enqueued: 'Enqueued',
  claimed: 'Claimed',
  lease_extended: 'Lease extended',
  completed: 'Completed',
  failed: 'Attempt failed',
  retried: 'Retried',
  released: 'Released',
  cancel_requested: 'Cancel requested',
  cancelled: 'Cancelled',
  expired: 'Expired',
  lease_expired: 'Lease expired',
  rescheduled: 'Rescheduled',
  callback_enqueued: 'Callback enqueued',
  callback_failed: 'Callback attempt failed',
  callback_cancelled: 'Callback cancelled',
  callback_delivered: 'Callback delivered',
  parked: 'Parked at a step',
  resumed: 'Resumed',
  held: "Held for its key's turn",
  debounced: 'Debounced',
  replaced: 'Payload replaced',
};
let shownJobId: string | null = null;

function jobPath(id: string): string {
  return `/v1/jobs/${encodeURIComponent(id)}`;
}

export async function loadJob(id: string): Promise<void> {
  const [job, history, steps] = await Promise.all([
    api<Job>(jobPath(id)),
    api<JobHistory>(`${jobPath(id)}/history`),
    api<JobSteps>(`${jobPath(id)}/steps`),
  ]);
  shownJobId = job.id;
  renderJob(job);
  renderHistory(history.events);
  renderSteps(steps);
}

function jobDetails(job: Job): Array<[string, string | number]> {
  return [
    ['Queue', job.queue],
    ['Tenant', job.tenant],
    ['Type', job.type],
    ['Priority', job.priority],
    ['Attempts', `${job.attempts} of ${job.maxAttempts}`],
    ['Created', formatTime(job.createdAt)],
    ['Run at', formatTime(job.runAt)],
    ['First started', formatTime(job.firstStartedAt)],
    ['Started', formatTime(job.startedAt)],
    ['Finished', formatTime(job.finishedAt)],
    ['Duration', formatDuration(job.durationMs)],
    ['Lease', `${job.leaseSeconds} s per attempt`],
    ['Lease expires', job.status === 'running' ? formatFromNow(job.leaseExpiresAt) : '—'],
    ['Worker', job.workerId || '—'],
    ['Expires', formatTime(job.expiresAt)],
    ['Dedup key', job.dedupKey || '—'],
    ['Cancel requested', job.cancelRequested ? 'yes' : 'no'],
    ['Callback', job.callbackUrl || '—'],
    ['Failure callback', job.failureCallbackUrl || '—'],
  ];
}

function renderJob(job: Job): void {
  byId('job-id').textContent = job.id;
  setBadge(byId('job-status'), job.status);
  byId('job-retry', HTMLButtonElement).disabled = !RETRYABLE.includes(job.status);
  byId('job-cancel', HTMLButtonElement).disabled = isFinal(job.status) || job.cancelRequested;
  byId('job-details').replaceChildren(
    ...jobDetails(job).flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
  );
  byId('job-payload').textContent = formatJson(job.payload);
  byId('job-result').textContent = formatJson(job.result);
  byId('job-error').textContent = formatJson(job.lastError);
  byId('job-progress').textContent = formatJson(job.progress);
}

function renderHistory(events: readonly JobEvent[]): void {
  byId('job-history').replaceChildren(
    ...events.map((event) =>
      h(
        'li',
        {},
        h('span', { class: 'event-kind' }, EVENT_LABELS[event.kind]),
        ' ',
        h('time', { datetime: event.at }, formatTime(event.at)),
        event.attempt > 0 ? ` · attempt ${event.attempt}` : null,
        event.workerId ? ` · ${event.workerId}` : null,
        event.detail === null ? null : h('span', { class: 'event-detail' }, JSON.stringify(event.detail)),
      ),
    ),
  );
}

const LINK_LABELS: Record<JobSteps['links'][number]['kind'], string> = {
  child: 'Child',
  parent: 'Parent',
  dependency: 'Depends on',
  dependent: 'Needed by',
};

function waitText(wait: JobSteps['waitingFor'][number]): string {
  switch (wait.kind) {
    case 'sleep':
      return `Sleeping at step "${wait.step}" until ${formatTime(wait.until)}`;
    case 'event':
      return `Waiting at step "${wait.step}" for event ${wait.event}${wait.key === null ? '' : ` (key ${wait.key})`} until ${formatTime(wait.timeoutAt)}`;
    case 'child':
      return `Waiting at step "${wait.step}" for child ${wait.jobId}`;
    case 'dependency':
      return `Waiting for job ${wait.jobId}`;
    case 'key':
      return wait.blockedBy === null
        ? `Held for its turn of ${wait.ordered ? 'ordering' : 'concurrency'} key ${wait.key}`
        : `Held: ordering key ${wait.key} waits for failed job ${wait.blockedBy} to be retried or the key unblocked`;
    case 'debounce':
      return `Debounced: ${wait.enqueues} enqueues of key ${wait.key} so far; starts ${formatTime(wait.until)} unless another moves it`;
  }
}

/** Durable steps: shown only for a job that has any, or links to other jobs. */
function renderSteps({ steps, waitingFor, links }: JobSteps): void {
  byId('job-steps-panel').hidden = steps.length === 0 && waitingFor.length === 0 && links.length === 0;
  byId('job-waiting').textContent = waitingFor.map(waitText).join('; ');
  byId('job-steps').replaceChildren(
    ...steps.map((step) =>
      h(
        'tr',
        {},
        h('td', {}, h('code', {}, step.name)),
        h('td', {}, step.kind),
        h('td', {}, step.status === 'done' ? 'done' : `retrying (${step.failedAttempts} failed)`),
        h('td', {}, step.attempt ?? '—'),
        h('td', {}, h('time', { datetime: step.recordedAt }, formatTime(step.recordedAt))),
        h('td', {}, h('code', {}, formatJson(step.status === 'done' ? step.result : step.lastError).slice(0, 120))),
      ),
    ),
  );
  byId('job-links').replaceChildren(
    ...links.map((link) =>
      h(
        'li',
        {},
        `${LINK_LABELS[link.kind]}: `,
        jobLink(link.jobId),
        ` ${link.type ?? ''} · ${link.status ?? 'gone'}`,
        link.step === null ? null : ` · step "${link.step}"`,
      ),
    ),
  );
}

interface JobAction {
  title: string;
  text: string;
  confirm: string;
  /** The notice once the API has answered with the job. */
  done: (job: Job) => string;
}

const JOB_ACTIONS: Record<'retry' | 'cancel', JobAction> = {
  retry: {
    title: 'Retry this job?',
    text: 'It is queued again with a fresh set of attempts.',
    confirm: 'Retry',
    done: () => 'The job is queued again.',
  },
  cancel: {
    title: 'Cancel this job?',
    text: 'A waiting job is cancelled at once; a running one stops at its next heartbeat.',
    confirm: 'Cancel job',
    done: (job) =>
      job.status === 'cancelled'
        ? 'The job is cancelled.'
        : 'Cancellation requested: the job stops at its next heartbeat.',
  },
};

async function runJobAction(name: keyof typeof JOB_ACTIONS): Promise<void> {
  const action = JOB_ACTIONS[name];
  const id = shownJobId;
  if (id === null || !(await confirmAction(action.title, action.text, action.confirm))) return;
  try {
    const job = await api<Job>(`${jobPath(id)}/${name}`, { method: 'POST' });
    showNotice('ok', action.done(job));
    await loadJob(id);
  } catch (problem) {
    showNotice('error', `Refused. ${problemMessage(problem)}`);
  }
}

export function wireJobView(): void {
  byId('job-retry').addEventListener('click', () => runJobAction('retry'));
  byId('job-cancel').addEventListener('click', () => runJobAction('cancel'));
}
