/**
 * The job list. Filters and the page's cursor live in the URL hash
 * (#/jobs?queue=…&status=…&cursor=…), so a view can be bookmarked or shared;
 * the cursors of newer pages are remembered here, since the API pages only
 * towards older jobs.
 */
export const jobListJs = /* js */ `
const FILTERS = ['queue', 'tenant', 'status'];
const PAGE_SIZE = 25;
let shownJobsParams = new URLSearchParams();
let olderCursor = null;
let newerCursors = [];

function jobsHash(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
  const text = query.toString();
  return '#/jobs' + (text ? '?' + text : '');
}

function jobLink(id) {
  return h('a', { href: '#/jobs/' + id, title: id }, h('code', {}, shortId(id)));
}

function shownFilters() {
  return Object.fromEntries(FILTERS.map((name) => [name, shownJobsParams.get(name) || '']));
}

async function loadJobs(params, refreshing) {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  for (const name of [...FILTERS, 'cursor']) if (params.get(name)) query.set(name, params.get(name));
  const page = await api('/v1/jobs?' + query);
  shownJobsParams = params;
  // A refresh must not undo what someone is typing into the filters.
  if (!refreshing) for (const name of FILTERS) byId('filter-' + name).value = params.get(name) || '';
  byId('jobs-table').tBodies[0].replaceChildren(...page.jobs.map(jobRow));
  byId('jobs-empty').hidden = page.jobs.length > 0;
  olderCursor = page.nextCursor;
  byId('jobs-older').disabled = olderCursor === null;
  byId('jobs-newer').disabled = !params.get('cursor');
}

function jobRow(job) {
  return h('tr', { 'data-job': job.id },
    h('td', {}, jobLink(job.id)),
    h('td', {}, h('span', { class: 'badge', 'data-status': job.status }, STATUS_LABELS[job.status])),
    h('td', {}, job.queue),
    h('td', {}, job.tenant),
    h('td', {}, job.type),
    h('td', { class: 'num' }, job.attempts + ' / ' + job.maxAttempts),
    h('td', {}, formatTime(job.createdAt)),
    h('td', {}, formatTime(job.finishedAt)));
}

function wireJobList() {
  const form = byId('job-filters');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    newerCursors = [];
    location.hash = jobsHash(Object.fromEntries(FILTERS.map((name) => [name, byId('filter-' + name).value.trim()])));
  });
  form.addEventListener('reset', () => {
    newerCursors = [];
    location.hash = '#/jobs';
  });
  byId('jobs-older').addEventListener('click', () => {
    newerCursors.push(shownJobsParams.get('cursor') || '');
    location.hash = jobsHash({ ...shownFilters(), cursor: olderCursor });
  });
  byId('jobs-newer').addEventListener('click', () => {
    // After a reload the stack is empty: the newest page is the way back.
    location.hash = jobsHash({ ...shownFilters(), cursor: newerCursors.pop() || '' });
  });
}
`;
