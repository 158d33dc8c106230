import type { Json } from '../../../engine/types.js';
import type { JobStatusView } from '../../../http/status-view.js';
import { byId, formatTime, isFinal, setBadge } from '../../browser/shared.js';
import { waitingWords } from '../waiting-words.js';

/**
 * The status page's script: localizes the times, then follows the job over
 * the API's server-sent events (`/v1/jobs/{id}/events?token=…`, the same
 * token as the page) until it ends. The events carry the job's status view;
 * the page shows its status, times and progress.
 *
 * Progress shows when the view has a `percent` or a `message`: by default a
 * percentage the handler saved (`context.progress(40)`) or those fields of an
 * object it saved, or whatever the job definition's `publicProgress` makes.
 */

interface ShownProgress {
  percent: number | null;
  message: string | null;
}

const NO_PROGRESS: ShownProgress = { percent: null, message: null };
const card = byId('status-card');

function shownProgress(progress: Json): ShownProgress {
  const fields: Readonly<Record<string, Json | undefined>> =
    typeof progress === 'object' && progress !== null && !Array.isArray(progress) ? progress : {};
  const percent = typeof progress === 'number' ? progress : fields.percent;
  return {
    percent: typeof percent === 'number' && percent >= 0 && percent <= 100 ? Math.round(percent) : null,
    message: typeof fields.message === 'string' ? fields.message.slice(0, 200) : null,
  };
}

function showTime(name: 'started' | 'finished', iso: string | null): void {
  const time = byId(`${name}-at`, HTMLTimeElement);
  time.dateTime = iso ?? '';
  time.textContent = formatTime(iso);
  byId(`${name}-row`).hidden = !iso;
}

function render(job: JobStatusView): void {
  card.dataset.status = job.status;
  setBadge(byId('status-badge'), job.status);
  showTime('started', job.startedAt);
  showTime('finished', job.finishedAt);
  const waiting = byId('waiting-row');
  waiting.hidden = job.waitingFor === null;
  waiting.textContent = job.waitingFor === null ? '' : waitingWords(job.waitingFor, formatTime);
  const progress = isFinal(job.status) ? NO_PROGRESS : shownProgress(job.progress);
  const bar = byId('progress-bar', HTMLProgressElement);
  byId('progress-row').hidden = progress.percent === null && progress.message === null;
  bar.hidden = progress.percent === null;
  bar.value = progress.percent ?? 0;
  byId('progress-text').textContent = [progress.percent === null ? null : `${progress.percent}%`, progress.message]
    .filter(Boolean)
    .join(' · ');
}

function setLive(text: string): void {
  byId('live').textContent = text;
}

function follow(jobId: string): void {
  const token = new URLSearchParams(location.search).get('token') ?? '';
  const events = new EventSource(`/v1/jobs/${encodeURIComponent(jobId)}/events?token=${encodeURIComponent(token)}`);
  events.addEventListener('open', () => setLive('Updating live'));
  // The server sends the job's status view, made from its schema.
  events.addEventListener('job', (event) => render(JSON.parse(event.data) as JobStatusView));
  events.addEventListener('end', () => {
    events.close();
    setLive('');
  });
  // EventSource reconnects by itself after a dropped stream; CLOSED means it was refused (the link expired).
  events.addEventListener('error', () =>
    setLive(
      events.readyState === EventSource.CLOSED ? 'Live updates stopped: the link may have expired.' : 'Reconnecting…',
    ),
  );
}

for (const time of document.querySelectorAll('time[datetime]'))
  if (time instanceof HTMLTimeElement) time.textContent = formatTime(time.dateTime);
if (!isFinal(card.dataset.status)) follow(card.dataset.jobId ?? '');
