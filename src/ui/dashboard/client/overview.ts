/** The overview: totals, throughput chart, queues, tenants and running jobs. */
export const overviewJs = /* js */ `
const WAITING = ['queued', 'scheduled', 'retrying'];
const QUEUE_COLUMNS = ['queued', 'scheduled', 'retrying', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];
const TENANT_COLUMNS = ['waiting', 'running', 'succeeded', 'failed'];
const RUNNING_SHOWN = 20;
/** The windows the daily rollup answers, in days; the others are /v1/stats/timings windows. */
const DAILY_WINDOWS = { '30d': 30, '90d': 90 };
const TIMING_FIGURES = ['attempts', 'failed'];

async function loadOverview() {
  const [queues, stats, throughput, running, timings] = await Promise.all([
    api('/v1/queues'),
    api('/v1/stats'),
    api('/v1/stats/throughput'),
    api('/v1/jobs?status=running&limit=' + RUNNING_SHOWN),
    loadTimings(byId('timings-window').value),
  ]);
  renderTimings(timings);
  renderTotals(queues.queues);
  renderThroughput(throughput.throughput);
  renderQueues(queues.queues, throughput.throughput);
  renderTenants(stats.stats);
  renderHealth(stats.health);
  renderRunning(running.jobs);
  offerNames('queue-names', queues.queues.map((queue) => queue.queue));
  offerNames('tenant-names', stats.stats.map((row) => row.tenant));
}

function waitingIn(counts) {
  return WAITING.reduce((sum, status) => sum + counts[status], 0);
}

function renderTotals(queues) {
  const total = (status) => queues.reduce((sum, queue) => sum + queue.counts[status], 0);
  const waits = queues.map((queue) => queue.oldestWaitSeconds).filter((seconds) => seconds !== null);
  byId('total-waiting').textContent = WAITING.reduce((sum, status) => sum + total(status), 0);
  byId('total-running').textContent = total('running');
  byId('total-succeeded').textContent = total('succeeded');
  byId('total-failed').textContent = total('failed');
  byId('total-oldest').textContent = waits.length === 0 ? '—' : formatSeconds(Math.max(...waits));
}

function renderHealth(health) {
  // A tenant-bound key gets none of the database's own figures.
  const tables = health.deadTuples || [];
  byId('health-oldest-waiting').textContent = formatSeconds(health.oldestWaitingSeconds);
  byId('health-reaped').textContent = health.expiredLeasesReaped;
  byId('health-dead-tuples').textContent = health.deadTuples ? tables.reduce((sum, table) => sum + table.deadTuples, 0) : '—';
  byId('health-dead-tuples').title = tables.map((table) => table.table + ': ' + table.deadTuples).join(', ');
  byId('health-oldest-snapshot').textContent = health.oldestSnapshotSeconds == null
    ? '—'
    : formatSeconds(health.oldestSnapshotSeconds) + ' (pid ' + health.oldestSnapshotPid + ')';
}

function renderThroughput(rows) {
  const slots = minuteSlots(rows);
  byId('throughput-chart').replaceChildren(throughputChart(slots));
  byId('throughput-peak').textContent = 'peak ' + Math.max(0, ...slots.map(finishedIn)) + ' per minute';
}

/** A count that opens the job list of its queue and status. */
function countCell(queue, status, count) {
  return h('td', { class: 'num', 'data-count': status }, count === 0 ? '0' : h('a', { href: jobsHash({ queue, status }) }, count));
}

function renderQueues(queues, throughputRows) {
  const deepest = Math.max(1, ...queues.map((queue) => waitingIn(queue.counts) + queue.counts.running));
  const rows = queues.map((queue) =>
    h('tr', { 'data-queue': queue.queue },
      h('th', { scope: 'row' }, h('a', { href: jobsHash({ queue: queue.queue }) }, queue.queue), queueSettings(queue)),
      h('td', {}, depthBar(queue.counts, deepest)),
      ...QUEUE_COLUMNS.map((status) => countCell(queue.queue, status, queue.counts[status])),
      h('td', { class: 'num' }, formatSeconds(queue.oldestWaitSeconds)),
      h('td', {}, sparkline(minuteSlots(throughputRows.filter((row) => row.queue === queue.queue)), 'Jobs finished per minute in ' + queue.queue))));
  byId('queues-table').tBodies[0].replaceChildren(...rows);
  byId('queues-empty').hidden = queues.length > 0;
}

/** A queue's own settings, under its name; nothing for the defaults (no cap, weight 1, no delivery target). */
function queueSettings(queue) {
  const said = [];
  if (queue.concurrency !== null) said.push('cap ' + queue.concurrency);
  if (queue.weight !== 1) said.push('weight ' + queue.weight);
  if (queue.delivery !== null) said.push('to ' + deliveryTarget(queue.delivery));
  if (said.length === 0) return null;
  const title = "Cap: running jobs at once, over all tenants. Weight: share of each tenant's turns. " +
    'To: where the drains deliver its jobs, instead of to handlers.';
  return h('div', { class: 'muted queue-settings', 'data-settings': '', title }, said.join(', '));
}

/** Where a queue's jobs go: the webhook's host, or the Cloudflare queue's binding. */
function deliveryTarget(delivery) {
  if (delivery.target !== 'webhook') return 'Cloudflare queue ' + delivery.binding;
  // A target written in SQL is not checked: an unreadable URL is shown as it is.
  return 'webhook ' + (URL.canParse(delivery.url) ? new URL(delivery.url).host : delivery.url);
}

/** The stats rows (queue, tenant, status) folded into one line per tenant. */
function tenantTotals(rows) {
  const tenants = new Map();
  for (const row of rows) {
    const totals = tenants.get(row.tenant) || { waiting: 0, running: 0, succeeded: 0, failed: 0 };
    const column = WAITING.includes(row.status) ? 'waiting' : row.status;
    if (column in totals) totals[column] += row.count;
    tenants.set(row.tenant, totals);
  }
  return [...tenants].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function renderTenants(rows) {
  byId('tenants-table').tBodies[0].replaceChildren(...tenantTotals(rows).map(([tenant, totals]) =>
    h('tr', { 'data-tenant': tenant },
      h('th', { scope: 'row' }, h('a', { href: '#/tenants/' + encodeURIComponent(tenant) }, tenant)),
      ...TENANT_COLUMNS.map((column) => h('td', { class: 'num', 'data-count': column }, totals[column])))));
}

async function loadTimings(span) {
  if (span in DAILY_WINDOWS) return (await api('/v1/stats/daily?days=' + DAILY_WINDOWS[span])).totals;
  return (await api('/v1/stats/timings?window=' + encodeURIComponent(span))).timings;
}

function renderTimings(rows) {
  byId('timings-table').tBodies[0].replaceChildren(...rows.map((row) =>
    h('tr', {},
      h('th', { scope: 'row' }, h('a', { href: jobsHash({ queue: row.queue }) }, row.queue)),
      h('td', {}, row.tenant),
      ...TIMING_FIGURES.map((figure) => h('td', { class: 'num', 'data-figure': figure }, row[figure])),
      ...['waitMs', 'runMs'].flatMap((measure) => ['p50', 'p95'].map((percentile) =>
        h('td', { class: 'num', 'data-figure': measure + '.' + percentile }, formatDuration(row[measure][percentile])))))));
  byId('timings-empty').hidden = rows.length > 0;
}

function wireOverview() {
  // Another window: the overview again, read as a refresh (the page stays where it is).
  byId('timings-window').addEventListener('change', () => scheduleRender(true));
}

function renderRunning(jobs) {
  byId('running-table').tBodies[0].replaceChildren(...jobs.map((job) =>
    h('tr', {},
      h('td', {}, jobLink(job.id)),
      h('td', {}, job.queue),
      h('td', {}, job.tenant),
      h('td', {}, formatFromNow(job.startedAt)),
      h('td', { title: formatTime(job.leaseExpiresAt) }, formatFromNow(job.leaseExpiresAt)))));
  byId('running-empty').hidden = jobs.length > 0;
}

/** Suggestions for the filter and tenant inputs. */
function offerNames(listId, names) {
  byId(listId).replaceChildren(...[...new Set(names)].sort().map((name) => h('option', { value: name })));
}
`;
