import { byId, formatTime } from '../../browser/shared.js';
import { STATUS_LABELS } from '../../job-status.js';
import { api } from './api.js';
import type { Job, JobPage } from './api-types.js';
import { showBulkScope } from './bulk-actions.js';
import { h, showRows } from './elements.js';
import { shortId } from './format.js';

/**
 * The job list. Filters and the page's cursor live in the URL hash
 * (#/jobs?queue=…&tag=…&status=…&payload=…&cursor=…), so a view can be bookmarked or shared;
 * the cursors of newer pages are remembered here, since the API pages only
 * towards older jobs.
 */

const FILTERS = ['queue', 'tenant', 'type', 'tag', 'status', 'payload'] as const;
type Filter = (typeof FILTERS)[number];
const PAGE_SIZE = 25;
let shownJobsParams = new URLSearchParams();
let olderCursor: string | null = null;
let newerCursors: string[] = [];

/** The hash of the job list with these filters (and cursor); empty ones are left out. */
export function jobsHash(params: Readonly<Record<string, string | null | undefined>>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
  const text = query.toString();
  return `#/jobs${text ? `?${text}` : ''}`;
}

export function jobLink(id: string): HTMLAnchorElement {
  return h('a', { href: `#/jobs/${id}`, title: id }, h('code', {}, shortId(id)));
}

function filterField(name: Filter): HTMLInputElement | HTMLSelectElement {
  return name === 'status' ? byId('filter-status', HTMLSelectElement) : byId(`filter-${name}`, HTMLInputElement);
}

function shownFilters(): Record<string, string> {
  return Object.fromEntries(FILTERS.map((name) => [name, shownJobsParams.get(name) ?? '']));
}

export async function loadJobs(params: URLSearchParams, refreshing: boolean): Promise<void> {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  for (const name of [...FILTERS, 'cursor']) {
    const value = params.get(name);
    if (value) query.set(name, value);
  }
  // Until these jobs show, the bulk action has no filter to take (the rows shown are another filter's).
  if (!refreshing) showBulkScope(null);
  const page = await api<JobPage>(`/v1/jobs?${query}`);
  shownJobsParams = params;
  if (!refreshing) showBulkScope(params);
  // A refresh must not undo what someone is typing into the filters.
  if (!refreshing) for (const name of FILTERS) filterField(name).value = params.get(name) ?? '';
  showRows('jobs-table', page.jobs.map(jobRow));
  byId('jobs-empty').hidden = page.jobs.length > 0;
  olderCursor = page.nextCursor;
  byId('jobs-older', HTMLButtonElement).disabled = olderCursor === null;
  byId('jobs-newer', HTMLButtonElement).disabled = !params.get('cursor');
}

function jobRow(job: Job): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-job': job.id },
    h('td', {}, jobLink(job.id)),
    h('td', {}, h('span', { class: 'badge', 'data-status': job.status }, STATUS_LABELS[job.status])),
    h('td', {}, job.queue),
    h('td', {}, job.tenant),
    h('td', {}, job.type),
    h('td', {}, ...job.tags.map((tag) => h('span', { class: 'tag' }, tag))),
    h('td', { class: 'num' }, `${job.attempts} / ${job.maxAttempts}`),
    h('td', {}, formatTime(job.createdAt)),
    h('td', {}, formatTime(job.finishedAt)),
  );
}

export function wireJobList(): void {
  const form = byId('job-filters', HTMLFormElement);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    newerCursors = [];
    location.hash = jobsHash(Object.fromEntries(FILTERS.map((name) => [name, filterField(name).value.trim()])));
  });
  form.addEventListener('reset', () => {
    newerCursors = [];
    location.hash = '#/jobs';
  });
  byId('jobs-older').addEventListener('click', () => {
    newerCursors.push(shownJobsParams.get('cursor') ?? '');
    location.hash = jobsHash({ ...shownFilters(), cursor: olderCursor });
  });
  byId('jobs-newer').addEventListener('click', () => {
    // After a reload the stack is empty: the newest page is the way back.
    location.hash = jobsHash({ ...shownFilters(), cursor: newerCursors.pop() ?? '' });
  });
}
