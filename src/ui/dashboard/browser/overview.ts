import type { JobStatus } from '../../../engine/types.js';
import { byId, formatTime } from '../../browser/shared.js';
import { api, problemMessage } from './api.js';
import type {
  AttemptTimings,
  DailyAttemptStats,
  Job,
  JobPage,
  QueueList,
  QueueSummary,
  Stats,
  Throughput,
  ThroughputRow,
} from './api-types.js';
import { depthBar, finishedIn, minuteSlots, sparkline, throughputChart } from './charts.js';
import { h, showRows } from './elements.js';
import { confirmAction, showNotice } from './notice.js';
import { formatDuration, formatFromNow, formatSeconds } from './format.js';
import { jobLink, jobsHash } from './job-list.js';

/** The overview: totals, throughput chart, queues, tenants and running jobs. */

type StatusCounts = QueueSummary['counts'];
type StatsRow = Stats['stats'][number];
type TimingsRow = AttemptTimings['timings'][number];

const WAITING: readonly JobStatus[] = ['queued', 'scheduled', 'retrying'];
const QUEUE_COLUMNS: readonly JobStatus[] = [
  'queued',
  'scheduled',
  'retrying',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
];
const TENANT_COLUMNS = ['waiting', 'running', 'succeeded', 'failed'] as const;
type TenantColumn = (typeof TENANT_COLUMNS)[number];
const RUNNING_SHOWN = 20;
/** The windows the daily rollup answers, in days; the others are /v1/stats/timings windows. */
const DAILY_WINDOWS: Readonly<Record<string, number>> = { '30d': 30, '90d': 90 };
const TIMING_FIGURES = ['attempts', 'failed'] as const;
const TIMING_MEASURES = ['waitMs', 'runMs'] as const;
const PERCENTILES = ['p50', 'p95'] as const;

export async function loadOverview(): Promise<void> {
  const [queues, stats, throughput, running, timings] = await Promise.all([
    api<QueueList>('/v1/queues'),
    api<Stats>('/v1/stats'),
    api<Throughput>('/v1/stats/throughput'),
    api<JobPage>(`/v1/jobs?status=running&limit=${RUNNING_SHOWN}`),
    loadTimings(byId('timings-window', HTMLSelectElement).value),
  ]);
  renderTimings(timings);
  renderTotals(queues.queues);
  renderThroughput(throughput.throughput);
  renderQueues(queues.queues, throughput.throughput);
  renderTenants(stats.stats);
  renderHealth(stats.health);
  renderRunning(running.jobs);
  offerNames(
    'queue-names',
    queues.queues.map((queue) => queue.queue),
  );
  offerNames(
    'tenant-names',
    stats.stats.map((row) => row.tenant),
  );
}

function waitingIn(counts: StatusCounts): number {
  return WAITING.reduce((sum, status) => sum + counts[status], 0);
}

function renderTotals(queues: readonly QueueSummary[]): void {
  const total = (status: JobStatus) => queues.reduce((sum, queue) => sum + queue.counts[status], 0);
  const waits = queues.map((queue) => queue.oldestWaitSeconds).filter((seconds) => seconds !== null);
  byId('total-waiting').textContent = String(WAITING.reduce((sum, status) => sum + total(status), 0));
  byId('total-running').textContent = String(total('running'));
  byId('total-succeeded').textContent = String(total('succeeded'));
  byId('total-failed').textContent = String(total('failed'));
  byId('total-oldest').textContent = waits.length === 0 ? '—' : formatSeconds(Math.max(...waits));
}

function renderHealth(health: Stats['health']): void {
  // A tenant-bound key gets none of the database's own figures.
  const tables = health.deadTuples ?? [];
  byId('health-oldest-waiting').textContent = formatSeconds(health.oldestWaitingSeconds);
  byId('health-reaped').textContent = String(health.expiredLeasesReaped);
  byId('health-dead-tuples').textContent = health.deadTuples
    ? String(tables.reduce((sum, table) => sum + table.deadTuples, 0))
    : '—';
  byId('health-dead-tuples').title = tables.map((table) => `${table.table}: ${table.deadTuples}`).join(', ');
  byId('health-oldest-snapshot').textContent =
    health.oldestSnapshotSeconds == null
      ? '—'
      : `${formatSeconds(health.oldestSnapshotSeconds)} (pid ${health.oldestSnapshotPid})`;
}

function renderThroughput(rows: readonly ThroughputRow[]): void {
  const slots = minuteSlots(rows);
  byId('throughput-chart').replaceChildren(throughputChart(slots));
  byId('throughput-peak').textContent = `peak ${Math.max(0, ...slots.map(finishedIn))} per minute`;
}

/** A count that opens the job list of its queue and status. */
function countCell(queue: string, status: JobStatus, count: number): HTMLTableCellElement {
  return h(
    'td',
    { class: 'num', 'data-count': status },
    count === 0 ? '0' : h('a', { href: jobsHash({ queue, status }) }, count),
  );
}

function renderQueues(queues: readonly QueueSummary[], throughputRows: readonly ThroughputRow[]): void {
  const deepest = Math.max(1, ...queues.map((queue) => waitingIn(queue.counts) + queue.counts.running));
  showRows(
    'queues-table',
    queues.map((queue) =>
      h(
        'tr',
        { 'data-queue': queue.queue },
        h(
          'th',
          { scope: 'row' },
          h('a', { href: jobsHash({ queue: queue.queue }) }, queue.queue),
          queueSettings(queue),
          pauseButton(queue),
        ),
        h('td', {}, depthBar(queue.counts, deepest)),
        ...QUEUE_COLUMNS.map((status) => countCell(queue.queue, status, queue.counts[status])),
        h('td', { class: 'num' }, formatSeconds(queue.oldestWaitSeconds)),
        h(
          'td',
          {},
          sparkline(
            minuteSlots(throughputRows.filter((row) => row.queue === queue.queue)),
            `Jobs finished per minute in ${queue.queue}`,
          ),
        ),
      ),
    ),
  );
  byId('queues-empty').hidden = queues.length > 0;
}

/** A queue's own settings, under its name; nothing for the defaults (no cap, weight 1, no delivery target). */
function queueSettings(queue: QueueSummary): HTMLDivElement | null {
  const said: string[] = [];
  if (isPaused(queue)) said.push(`paused since ${formatTime(queue.pausedAt)}`);
  if (queue.concurrency !== null) said.push(`cap ${queue.concurrency}`);
  if (queue.rateLimit !== null) {
    const dropped = queue.rateLimit.onExcess === 'drop' ? ', excess dropped' : '';
    said.push(`rate ${queue.rateLimit.count} per ${queue.rateLimit.perSeconds} s${dropped}`);
  }
  if (queue.weight !== 1) said.push(`weight ${queue.weight}`);
  // Left out for a tenant-bound key: where a queue's jobs go is its operator's.
  if (queue.delivery !== null && queue.delivery !== undefined) said.push(`to ${deliveryTarget(queue.delivery)}`);
  if (queue.held > 0) said.push(`${queue.held} held (${heldReasons(queue.heldBy)})`);
  if (queue.debounced > 0) said.push(`${queue.debounced} debounced`);
  if (said.length === 0) return null;
  const title =
    'Paused: no claim takes its waiting jobs until it is resumed. ' +
    "Cap: running jobs at once, over all tenants. Rate: jobs started per window, over all tenants. Weight: share of each tenant's turns. " +
    'To: where the drains deliver its jobs, instead of to handlers. ' +
    'Held: waiting jobs whose key keeps them back, by reason (counted as queued or scheduled). ' +
    'Debounced: jobs waiting out a debounce period, which a later enqueue of their key may move.';
  return h('div', { class: 'muted queue-settings', 'data-settings': '', title }, said.join(', '));
}

const HELD_REASONS: Record<keyof QueueSummary['heldBy'], string> = {
  concurrency: 'key at its limit',
  rate: 'rate window',
  order: "behind its key's head",
  failedHead: 'key held by a failed job',
};

/** The reasons a queue's held jobs wait, with their counts: "2 key at its limit, 1 rate window". */
function heldReasons(heldBy: QueueSummary['heldBy']): string {
  return (Object.keys(HELD_REASONS) as Array<keyof typeof HELD_REASONS>)
    .filter((reason) => heldBy[reason] > 0)
    .map((reason) => `${heldBy[reason]} ${HELD_REASONS[reason]}`)
    .join(', ');
}

function isPaused(queue: QueueSummary): queue is QueueSummary & { pausedAt: string } {
  return typeof queue.pausedAt === 'string';
}

/** Pauses or resumes the queue, once confirmed (see pauseOrResume). */
function pauseButton(queue: QueueSummary): HTMLButtonElement {
  const action = isPaused(queue) ? 'resume' : 'pause';
  return h(
    'button',
    { type: 'button', class: 'secondary queue-action', 'data-queue-action': action, 'data-queue-name': queue.queue },
    isPaused(queue) ? 'Resume' : 'Pause',
  );
}

const QUEUE_ACTIONS = {
  pause: {
    title: (queue: string) => `Pause queue ${queue}?`,
    text: 'No claim takes its waiting jobs until it is resumed; running jobs finish, and its settings stay.',
    done: (queue: string) => `Paused. Queue ${queue} keeps its waiting jobs until it is resumed.`,
  },
  resume: {
    title: (queue: string) => `Resume queue ${queue}?`,
    text: 'Its waiting jobs are claimed again, under its settings as they were.',
    done: (queue: string) => `Resumed. Queue ${queue} runs its waiting jobs.`,
  },
} as const;

/** A click on a queue's Pause or Resume button: confirmed, sent, told, then the overview refreshed. */
async function pauseOrResume(button: HTMLButtonElement, refresh: () => void): Promise<void> {
  const action = button.dataset.queueAction === 'resume' ? 'resume' : 'pause';
  const queue = button.dataset.queueName ?? '';
  const said = QUEUE_ACTIONS[action];
  if (!(await confirmAction(said.title(queue), said.text, action === 'pause' ? 'Pause' : 'Resume'))) return;
  try {
    await api(`/v1/queues/${encodeURIComponent(queue)}/${action}`, { method: 'POST' });
    showNotice('ok', said.done(queue));
  } catch (problem) {
    showNotice('error', `Refused. ${problemMessage(problem)}`);
  }
  refresh();
}

/** Where a queue's jobs go: the webhook's host, or the Cloudflare queue's binding. */
function deliveryTarget(delivery: NonNullable<QueueSummary['delivery']>): string {
  if (delivery.target !== 'webhook') return `Cloudflare queue ${delivery.binding}`;
  // A target written in SQL is not checked: an unreadable URL is shown as it is.
  return `webhook ${URL.canParse(delivery.url) ? new URL(delivery.url).host : delivery.url}`;
}

/** The stats rows (queue, tenant, status) folded into one line per tenant. */
function tenantTotals(rows: readonly StatsRow[]): Array<[string, Record<TenantColumn, number>]> {
  const tenants = new Map<string, Record<TenantColumn, number>>();
  for (const row of rows) {
    const totals = tenants.get(row.tenant) ?? { waiting: 0, running: 0, succeeded: 0, failed: 0 };
    const column = WAITING.includes(row.status) ? 'waiting' : row.status;
    if (isTenantColumn(column)) totals[column] += row.count;
    tenants.set(row.tenant, totals);
  }
  return [...tenants].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function isTenantColumn(column: string): column is TenantColumn {
  return TENANT_COLUMNS.some((tenantColumn) => tenantColumn === column);
}

function renderTenants(rows: readonly StatsRow[]): void {
  showRows(
    'tenants-table',
    tenantTotals(rows).map(([tenant, totals]) =>
      h(
        'tr',
        { 'data-tenant': tenant },
        h('th', { scope: 'row' }, h('a', { href: `#/tenants/${encodeURIComponent(tenant)}` }, tenant)),
        ...TENANT_COLUMNS.map((column) => h('td', { class: 'num', 'data-count': column }, totals[column])),
      ),
    ),
  );
}

async function loadTimings(span: string): Promise<TimingsRow[]> {
  const days = DAILY_WINDOWS[span];
  if (days !== undefined) return (await api<DailyAttemptStats>(`/v1/stats/daily?days=${days}`)).totals;
  return (await api<AttemptTimings>(`/v1/stats/timings?window=${encodeURIComponent(span)}`)).timings;
}

function renderTimings(rows: readonly TimingsRow[]): void {
  showRows(
    'timings-table',
    rows.map((row) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, h('a', { href: jobsHash({ queue: row.queue }) }, row.queue)),
        h('td', {}, row.tenant),
        ...TIMING_FIGURES.map((figure) => h('td', { class: 'num', 'data-figure': figure }, row[figure])),
        ...TIMING_MEASURES.flatMap((measure) =>
          PERCENTILES.map((percentile) =>
            h(
              'td',
              { class: 'num', 'data-figure': `${measure}.${percentile}` },
              formatDuration(row[measure][percentile]),
            ),
          ),
        ),
      ),
    ),
  );
  byId('timings-empty').hidden = rows.length > 0;
}

/** Another window: `refresh` shows the overview again, read as a refresh (the page stays where it is). */
export function wireOverview(refresh: () => void): void {
  byId('timings-window').addEventListener('change', refresh);
  byId('queues-table').addEventListener('click', (event) => {
    const button = (event.target as Element).closest<HTMLButtonElement>('button[data-queue-action]');
    if (button !== null) void pauseOrResume(button, refresh);
  });
}

function renderRunning(jobs: readonly Job[]): void {
  showRows(
    'running-table',
    jobs.map((job) =>
      h(
        'tr',
        {},
        h('td', {}, jobLink(job.id)),
        h('td', {}, job.queue),
        h('td', {}, job.tenant),
        h('td', {}, formatFromNow(job.startedAt)),
        h('td', { title: formatTime(job.leaseExpiresAt) }, formatFromNow(job.leaseExpiresAt)),
      ),
    ),
  );
  byId('running-empty').hidden = jobs.length > 0;
}

/** Suggestions for the filter and tenant inputs. */
function offerNames(listId: string, names: readonly string[]): void {
  byId(listId).replaceChildren(...[...new Set(names)].sort().map((name) => h('option', { value: name })));
}
