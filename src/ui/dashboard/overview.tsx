import { DEPTH_ORDER } from './depth-order.js';
import { Panel, ScrollTable } from './panel.js';

const TOTALS = [
  { id: 'total-waiting', label: 'Waiting' },
  { id: 'total-running', label: 'Running' },
  { id: 'total-succeeded', label: 'Succeeded, last hour' },
  { id: 'total-failed', label: 'Failed, last hour' },
  { id: 'total-oldest', label: 'Oldest wait' },
];

/** GET /v1/stats `health`: what goes wrong before jobs visibly stall. */
const HEALTH = [
  { id: 'health-oldest-waiting', label: 'Oldest waiting job', hint: 'How long the oldest ready job has waited' },
  {
    id: 'health-reaped',
    label: 'Expired leases, last hour',
    hint: 'Jobs handed back because their worker died or hung',
  },
  { id: 'health-dead-tuples', label: 'Dead tuples', hint: 'Dead row versions in the queue tables, waiting for vacuum' },
  { id: 'health-oldest-snapshot', label: 'Oldest transaction', hint: 'The oldest open transaction holds back vacuum' },
];

/** GET /v1/stats/timings (exact, from the history) for the short windows, GET /v1/stats/daily (the daily rollup) for the long. */
const TIMING_WINDOWS = [
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
  { value: '30d', label: 'Last 30 days' },
  { value: '90d', label: 'Last 90 days' },
];

/** The colours of a chart; hidden from screen readers, which the charts' own labels tell everything. */
function Legend({ keys }: { keys: readonly string[] }) {
  return (
    <p class="legend" aria-hidden="true">
      {keys.map((key) => (
        <span class={`swatch swatch-${key}`}>{key}</span>
      ))}
    </p>
  );
}

/** Queues and tenants at a glance; filled by the script from /v1/queues, /v1/stats, /v1/stats/throughput, /v1/stats/timings or /v1/stats/daily, and /v1/jobs. */
export function Overview() {
  return (
    <section id="overview-view" aria-labelledby="overview-title" hidden>
      <h1 id="overview-title" tabindex={-1}>
        Overview
      </h1>
      <dl class="totals">
        {TOTALS.map((total) => (
          <div class="total">
            <dt>{total.label}</dt>
            <dd id={total.id}>—</dd>
          </div>
        ))}
      </dl>

      <Panel id="health" title="Health">
        <dl class="totals">
          {HEALTH.map((figure) => (
            <div class="total" title={figure.hint}>
              <dt>{figure.label}</dt>
              <dd id={figure.id}>—</dd>
            </div>
          ))}
        </dl>
      </Panel>

      <Panel id="throughput" title="Throughput, last hour" aside={<Legend keys={['succeeded', 'failed']} />}>
        <div id="throughput-chart" class="chart" />
        <p class="axis muted">
          <span>60 min ago</span>
          <span id="throughput-peak" />
          <span>now</span>
        </p>
      </Panel>

      <Panel id="queues" title="Queues" aside={<Legend keys={DEPTH_ORDER} />}>
        <ScrollTable
          id="queues-table"
          label="Queues"
          columns={[
            'Queue',
            'Depth',
            ...['Queued', 'Scheduled', 'Retrying', 'Running'].map((numeric) => ({ numeric })),
            ...['Succeeded', 'Failed', 'Cancelled', 'Expired'].map((status) => ({ numeric: `${status} (1 h)` })),
            { numeric: 'Oldest wait' },
            'Last hour',
          ]}
        />
        <p id="queues-empty" class="empty muted" hidden>
          No jobs yet.
        </p>
      </Panel>

      <Panel
        id="timings"
        title="Wait and run times"
        aside={
          <select id="timings-window" aria-label="Attempts that ended in">
            {TIMING_WINDOWS.map((window) => (
              <option value={window.value}>{window.label}</option>
            ))}
          </select>
        }
      >
        <ScrollTable
          id="timings-table"
          label="Wait and run times per queue and tenant"
          columns={[
            'Queue',
            'Tenant',
            ...['Attempts', 'Failed', 'Wait p50', 'Wait p95', 'Run p50', 'Run p95'].map((numeric) => ({ numeric })),
          ]}
        />
        <p id="timings-empty" class="empty muted" hidden>
          No attempt ended in this period.
        </p>
        <p class="muted footnote">
          Wait: from when an attempt was due until its handler started. Run: until it ended. Over 30 and 90 days, from
          the daily rollup, within 9%.
        </p>
      </Panel>

      <div class="columns">
        <Panel id="tenants" title="Tenants">
          <ScrollTable
            id="tenants-table"
            label="Tenants"
            columns={[
              'Tenant',
              ...['Waiting', 'Running', 'Succeeded (1 h)', 'Failed (1 h)'].map((numeric) => ({ numeric })),
            ]}
          />
          <form id="open-tenant" class="inline-form">
            <label for="open-tenant-name">Settings of tenant</label>
            <input id="open-tenant-name" list="tenant-names" required />
            <button type="submit" class="secondary">
              Open
            </button>
          </form>
        </Panel>

        <Panel id="running" title="Running jobs">
          <ScrollTable
            id="running-table"
            label="Running jobs"
            columns={['Job', 'Queue', 'Tenant', 'Started', 'Lease expires']}
          />
          <p id="running-empty" class="empty muted" hidden>
            Nothing is running.
          </p>
        </Panel>
      </div>
    </section>
  );
}
