/**
 * What a million jobs cost on Workers Paid with Neon, from one run of
 * `npm run bench:workerd` (its `costInputs`: what each job cost in billed
 * units) and the vendors' published prices (PRICES, the one place they are
 * kept), beside Cloudflare Queues and Google Cloud Tasks. scripts/cost-page.ts
 * writes it as docs/cost.md.
 */
import type { CostInputs, RunCostInputs } from '../bench/cost-inputs';
import type { NetworkDelay } from '../src/local/neon-proxy';
import { markdownTable } from './markdown-table';

/** One published price: dollars per `per` units beyond what the plan includes each month. */
export interface Price {
  /** What is billed, as the vendor's page names it. */
  item: string;
  dollars: number;
  per: number;
  unit: string;
  /** Units the plan includes each month at no charge (0: none). */
  includedPerMonth: number;
  /** The vendor's page the price was read on. */
  source: string;
  /** When it was read there (YYYY-MM-DD). */
  read: string;
  /** Anything a reader should know about where the figure came from. */
  note?: string;
}

const READ = '2026-11-28';
const WORKERS_PRICING = 'https://developers.cloudflare.com/workers/platform/pricing/';
const DURABLE_OBJECTS_PRICING = 'https://developers.cloudflare.com/durable-objects/platform/pricing/';
const NEON_PLANS = 'https://neon.com/docs/introduction/plans';
const NEON_HISTORY_WINDOW = 'https://neon.com/docs/introduction/history-window';

/** Every price the page uses. Update here (with the date read) when a vendor changes one, then `npm run docs:cost`. */
export const PRICES = {
  workersPaid: {
    item: 'Workers Paid plan',
    dollars: 5,
    per: 1,
    unit: 'month (minimum charge)',
    includedPerMonth: 0,
    source: WORKERS_PRICING,
    read: READ,
  },
  workersRequests: {
    item: 'Workers requests (inbound requests; subrequests are not billed)',
    dollars: 0.3,
    per: 1e6,
    unit: 'requests',
    includedPerMonth: 10e6,
    source: WORKERS_PRICING,
    read: READ,
  },
  workersCpu: {
    item: 'Workers CPU time',
    dollars: 0.02,
    per: 1e6,
    unit: 'CPU ms',
    includedPerMonth: 30e6,
    source: WORKERS_PRICING,
    read: READ,
  },
  durableObjectRequests: {
    item: 'Durable Objects requests (HTTP requests, RPC sessions, alarm invocations)',
    dollars: 0.15,
    per: 1e6,
    unit: 'requests',
    includedPerMonth: 1e6,
    source: DURABLE_OBJECTS_PRICING,
    read: READ,
  },
  durableObjectDuration: {
    item: 'Durable Objects duration (wall time while active, at 128 MB)',
    dollars: 12.5,
    per: 1e6,
    unit: 'GB-s',
    includedPerMonth: 400_000,
    source: DURABLE_OBJECTS_PRICING,
    read: READ,
  },
  neonLaunch: {
    item: 'Neon Launch plan',
    dollars: 5,
    per: 1,
    unit: 'month (minimum)',
    includedPerMonth: 0,
    source: NEON_PLANS,
    read: READ,
  },
  neonCompute: {
    item: 'Neon compute, Launch (1 CU = 1 vCPU, 4 GB)',
    dollars: 0.14,
    per: 1,
    unit: 'CU-hour',
    includedPerMonth: 0,
    source: NEON_PLANS,
    read: READ,
    note: "Neon's FAQ pages (e.g. https://neon.com/faqs/managed-postgres-services-pay-active-compute) give $0.106; the plans page's higher figure is used",
  },
  neonStorage: {
    item: 'Neon storage',
    dollars: 0.35,
    per: 1,
    unit: 'GB-month',
    includedPerMonth: 0,
    source: NEON_PLANS,
    read: READ,
  },
  neonInstantRestore: {
    item: 'Neon instant restore (the WAL kept for the history window)',
    dollars: 0.2,
    per: 1,
    unit: 'GB-month',
    includedPerMonth: 0,
    source: NEON_PLANS,
    read: READ,
  },
  queuesOperations: {
    item: 'Cloudflare Queues operations (each 64 KB written, read or deleted)',
    dollars: 0.4,
    per: 1e6,
    unit: 'operations',
    includedPerMonth: 1e6,
    source: 'https://developers.cloudflare.com/queues/platform/pricing/',
    read: READ,
  },
  cloudTasksOperations: {
    item: 'Google Cloud Tasks billable operations (an API call or a push delivery attempt, per 32 KB)',
    dollars: 0.4,
    per: 1e6,
    unit: 'operations',
    includedPerMonth: 1e6,
    source: 'https://cloud.google.com/tasks/docs/pricing',
    read: READ,
  },
} as const satisfies Record<string, Price>;

/** What the page assumes where the run measures nothing; each is stated on the page. */
export const ASSUMPTIONS = {
  /** A Durable Object is billed at 128 MB, counted as Cloudflare's own examples count it (128 MB / 1 GB). */
  durableObjectGb: 0.128,
  /** Share of the time Neon's compute is busy while it runs: it autoscales with the load, never to exactly the CPU used. */
  neonUtilisation: 0.5,
  /** skiplock's default retention (RETENTION_SECONDS): a finished job's row is kept this long. */
  retentionDays: 7,
  /** Neon Launch's default history window (at most 7 days): the WAL each job writes is kept this long. */
  restoreWindowDays: 1,
  daysPerMonth: 30,
  /** A write, a read and a delete, per Cloudflare's pricing page. */
  queuesOperationsPerMessage: 3,
  /** The task's creation and one push delivery attempt. */
  cloudTasksOperationsPerTask: 2,
  /** Neon's smallest compute, for the floor of a queue that never lets it suspend. */
  neonSmallestCu: 0.25,
  hoursPerMonth: 720,
} as const;

/** One billed line for a million jobs: how many units, at which price, for how much. */
export interface CostLine {
  price: Price;
  /** Units for a million jobs; undefined when the run could not measure them. */
  units: number | undefined;
  /** How the units were worked out from the inputs. */
  from: string;
  dollars: number | undefined;
}

const MILLION = 1e6;

const line = (price: Price, units: number | undefined, from: string): CostLine => ({
  price,
  units,
  from,
  dollars: units === undefined ? undefined : (units * price.dollars) / price.per,
});

/** skiplock's bill for a million jobs beyond what the plans include, line by line. */
export function skiplockLines(inputs: CostInputs): CostLine[] {
  const a = ASSUMPTIONS;
  const requests = inputs.workerRequestsPerJob.http + inputs.workerRequestsPerJob.cron;
  const objectRequests =
    inputs.durableObjectRequestsPerJob.clock +
    inputs.durableObjectRequestsPerJob.helperStarts +
    inputs.durableObjectRequestsPerJob.helperAlarms;
  const activeSeconds = (inputs.durableObjectActiveMsPerJob.clock + inputs.durableObjectActiveMsPerJob.helpers) / 1000;
  const gbRetained = (bytes: number, days: number) => ((bytes * MILLION) / 1e9) * (days / a.daysPerMonth);
  return [
    line(PRICES.workersRequests, requests * MILLION, 'requests and cron invocations per job × 1,000,000'),
    line(PRICES.workersCpu, inputs.workerdCpuMsPerJob * MILLION, 'workerd CPU ms per job × 1,000,000'),
    line(PRICES.durableObjectRequests, objectRequests * MILLION, 'Durable Object requests per job × 1,000,000'),
    line(
      PRICES.durableObjectDuration,
      activeSeconds * a.durableObjectGb * MILLION,
      `active seconds per job × ${a.durableObjectGb} GB × 1,000,000`,
    ),
    line(
      PRICES.neonCompute,
      inputs.databaseCpuMsPerJob === null
        ? undefined
        : (inputs.databaseCpuMsPerJob * MILLION) / 3_600_000 / a.neonUtilisation,
      `database CPU hours per 1,000,000 jobs ÷ ${a.neonUtilisation} utilisation`,
    ),
    line(
      PRICES.neonStorage,
      gbRetained(inputs.bytesPerJob.tablesAndIndexes, a.retentionDays),
      `table and index GB per 1,000,000 jobs × ${a.retentionDays}/${a.daysPerMonth} month`,
    ),
    line(
      PRICES.neonInstantRestore,
      gbRetained(inputs.bytesPerJob.wal, a.restoreWindowDays),
      `WAL GB per 1,000,000 jobs × ${a.restoreWindowDays}/${a.daysPerMonth} month`,
    ),
  ];
}

/** The sum of the lines, or undefined when one of them could not be measured. */
export function total(lines: readonly CostLine[]): number | undefined {
  let sum = 0;
  for (const each of lines) {
    if (each.dollars === undefined) return undefined;
    sum += each.dollars;
  }
  return sum;
}

/** Cloudflare Queues' bill for a million messages of at most 64 KB, operations only. */
export function queuesLines(): CostLine[] {
  const operations = ASSUMPTIONS.queuesOperationsPerMessage;
  return [line(PRICES.queuesOperations, operations * MILLION, `${operations} operations per message × 1,000,000`)];
}

/** Google Cloud Tasks' bill for a million tasks of at most 32 KB, each delivered once. */
export function cloudTasksLines(): CostLine[] {
  const operations = ASSUMPTIONS.cloudTasksOperationsPerTask;
  return [line(PRICES.cloudTasksOperations, operations * MILLION, `${operations} operations per task × 1,000,000`)];
}

/** How many of these jobs a month the Workers Paid plan's included amounts cover, and which runs out first. */
export function includedJobsPerMonth(inputs: CostInputs): { jobs: number; first: string } {
  const perJob = skiplockLines(inputs)
    .filter((each) => each.price.source !== NEON_PLANS && each.units !== undefined)
    .map((each) => ({ item: each.price.item, jobs: (each.price.includedPerMonth * MILLION) / each.units! }));
  const first = perJob.reduce((least, each) => (each.jobs < least.jobs ? each : least));
  return { jobs: first.jobs, first: first.item };
}

/** The benchmark's whole output, as far as the page reads it. */
export interface BenchOutput {
  networkDelay: NetworkDelay;
  costInputs: RunCostInputs;
}

/** The workloads the page prices, in its order. */
const WORKLOADS = [
  { key: 'noop', name: 'no-op jobs, enqueued 1,000 a request' },
  { key: 'singleEnqueues', name: 'no-op jobs, enqueued one a request' },
  { key: 'io', name: 'jobs of 50 ms of I/O, enqueued 1,000 a request' },
] as const;

/** docs/cost.md for one run. */
export function costPage(bench: BenchOutput): string {
  const run = bench.costInputs;
  const a = ASSUMPTIONS;
  const skiplock = WORKLOADS.map((workload) => ({ ...workload, lines: skiplockLines(run[workload.key]) }));
  const queues = total(queuesLines())!;
  const cloudTasks = total(cloudTasksLines())!;
  const noop = total(skiplock[0]!.lines);
  const verdict =
    noop === undefined
      ? "**not decided**: this run could not read the database's CPU"
      : noop < queues
        ? `**met**: ${usd(noop)} against ${usd(queues)} for a million no-op jobs`
        : `**not met**: ${usd(noop)} against ${usd(queues)} for a million no-op jobs`;
  const delay = bench.networkDelay;
  const floor = a.neonSmallestCu * a.hoursPerMonth * PRICES.neonCompute.dollars;
  const noopCompute = skiplock[0]!.lines.find((each) => each.price === PRICES.neonCompute)?.dollars;
  const floorJobs = noopCompute === undefined ? 'an unmeasured number of' : count((floor / noopCompute) * MILLION);
  const perJobRows: Array<[string, (inputs: CostInputs) => number | null]> = [
    ['jobs measured', (i) => i.jobs],
    ['Worker requests (HTTP)', (i) => i.workerRequestsPerJob.http],
    ['cron invocations', (i) => i.workerRequestsPerJob.cron],
    ['Durable Object requests: the queue clock', (i) => i.durableObjectRequestsPerJob.clock],
    ['Durable Object requests: helper starts', (i) => i.durableObjectRequestsPerJob.helperStarts],
    ['Durable Object requests: helper alarms', (i) => i.durableObjectRequestsPerJob.helperAlarms],
    ['Durable Object active ms: the queue clock', (i) => i.durableObjectActiveMsPerJob.clock],
    ['Durable Object active ms: helpers', (i) => i.durableObjectActiveMsPerJob.helpers],
    ['workerd CPU ms', (i) => i.workerdCpuMsPerJob],
    ['database CPU ms', (i) => i.databaseCpuMsPerJob],
    ['subrequests to the database: HTTP requests', (i) => i.databaseTripsPerJob.http],
    ['subrequests to the database: WebSocket messages', (i) => i.databaseTripsPerJob.webSocket],
    ['statements', (i) => i.statementsPerJob],
    ['table and index bytes kept', (i) => i.bytesPerJob.tablesAndIndexes],
    ['WAL bytes', (i) => i.bytesPerJob.wal],
  ];
  const prices = Object.values(PRICES) as Price[];
  return `# What a million jobs cost

What skiplock costs to run a million jobs on Cloudflare Workers Paid with a Neon database, computed
from what each job cost in one run of \`npm run bench:workerd\` and from the vendors' published
prices, beside the same volume on Cloudflare Queues and on Google Cloud Tasks. This page is
generated: \`npm run docs:cost -- <the benchmark's JSON>\` writes it, so a new run or a new price
rewrites every figure ([reproduce](#reproduce)).

Target: skiplock's cost per no-op job below Cloudflare Queues'. ${verdict}. Enqueued one a
request instead of in batches, a million no-op jobs cost ${usdOrUnknown(total(skiplock[1]!.lines))}.

## A million jobs, beyond what the plans include

The marginal cost: what a million more jobs add to a bill whose monthly allowances are already
spent. The monthly minimums and allowances are [below](#monthly-minimums-and-allowances).

${markdownTable(
  ['a million …', 'on', 'cost'],
  [
    ...skiplock.map((workload) => [
      workload.name,
      'skiplock: Workers Paid + Neon Launch',
      usdOrUnknown(total(workload.lines)),
    ]),
    ['messages of at most 64 KB', 'Cloudflare Queues (operations only)', usd(queues)],
    ['tasks of at most 32 KB', 'Google Cloud Tasks (operations only)', usd(cloudTasks)],
  ],
)}
Queues and Cloud Tasks carry messages only: the consumer that runs each job (a Worker invoked
per batch of messages, the HTTP service Cloud Tasks delivers to) is billed on top and not counted
here. skiplock's figures include running the jobs: the drains are the Worker's own invocations.

## The run

${markdownTable(
  ['', ''],
  [
    ['command', `\`${run.command}\``],
    ['ended', run.measuredAt],
    [
      'machine',
      `${run.machine.cpus} × ${run.machine.model}, load average ${run.machine.loadAverage.map((n) => n.toFixed(2)).join(' / ')} at the end`,
    ],
    ['database', `${run.postgres} on the same machine, behind the local Neon proxy`],
    ['round trip to the database', `${delay.roundTripMs} ms (jitter ${delay.jitterMs} ms)`],
    ['cron', `fired every ${run.cronEverySeconds} s (a deployed Worker's fires once a minute)`],
    [
      'Worker settings',
      Object.keys(run.workerVariables).length === 0
        ? 'the defaults of `WORKERS_PLAN=paid` (fan-out 8)'
        : Object.entries(run.workerVariables)
            .map(([name, value]) => `\`${name}=${value}\``)
            .join(', '),
    ],
  ],
)}
## What each job cost

Per job, from its enqueue until it finished. Requests, cron invocations and the Durable Objects'
requests, alarms and active time are counted in workerd by the benchmark's entry module; workerd's
CPU and the database server's are read from \`/proc\`; subrequests are counted in the Neon proxy;
statements in \`pg_stat_database\`; bytes from \`pg_total_relation_size\` of skiplock's tables and from
the WAL position, before and after.

${markdownTable(
  ['per job', ...WORKLOADS.map((workload) => workload.name)],
  perJobRows.map(([name, read]) => [name, ...WORKLOADS.map((workload) => figure(read(run[workload.key])))]),
)}
## Prices

Each price as its vendor publishes it, read on the date shown.

${markdownTable(
  ['what', 'price', 'included each month', 'source', 'read'],
  prices.map((price) => [
    price.note === undefined ? price.item : `${price.item} (${price.note})`,
    `$${price.dollars.toFixed(2)} per ${price.per === MILLION ? 'million ' : ''}${price.unit}`,
    price.includedPerMonth === 0 ? '' : count(price.includedPerMonth),
    price.source,
    price.read,
  ]),
)}
## Line by line

${skiplock
  .map(
    (workload) => `### A million ${workload.name}

${markdownTable(
  ['billed', 'units', 'from', 'cost'],
  [
    ...workload.lines.map((each) => [
      each.price.item,
      each.units === undefined ? 'not measured' : `${figure(each.units)} ${each.price.unit}`,
      each.from,
      usdOrUnknown(each.dollars),
    ]),
    ['**total**', '', '', `**${usdOrUnknown(total(workload.lines))}**`],
  ],
)}`,
  )
  .join('\n')}
### Cloudflare Queues and Google Cloud Tasks

${markdownTable(
  ['billed', 'units', 'from', 'cost'],
  [...queuesLines(), ...cloudTasksLines()].map((each) => [
    each.price.item,
    `${figure(each.units!)} ${each.price.unit}`,
    each.from,
    usdOrUnknown(each.dollars),
  ]),
)}
## Monthly minimums and allowances

- Workers Paid: ${usd(PRICES.workersPaid.dollars)} a month, which includes ${count(PRICES.workersRequests.includedPerMonth)} requests, ${count(PRICES.workersCpu.includedPerMonth)} CPU ms, ${count(PRICES.durableObjectRequests.includedPerMonth)} Durable Object requests and ${count(PRICES.durableObjectDuration.includedPerMonth)} GB-s. At this run's figures, that covers:

${markdownTable(
  ['jobs', 'a month within the allowances', 'the first allowance to run out'],
  skiplock.map((workload) => {
    const included = includedJobsPerMonth(run[workload.key]);
    return [workload.name, count(included.jobs), included.first.replace(/ \(.*$/, '')];
  }),
)}
- An idle queue: the cron fires ${count(a.daysPerMonth * 24 * 60)} times a month and each tick asks the queue clock (one Durable Object request), well inside the allowances; with nothing due it runs no statement, so Neon's compute suspends after its 5 idle minutes.
- Neon Launch: ${usd(PRICES.neonLaunch.dollars)} a month minimum. Neon bills its compute for the time it runs at its size, not for the CPU it uses: a queue with jobs arriving all month keeps the smallest compute (${a.neonSmallestCu} CU) running, ${usd(floor)} a month (${a.neonSmallestCu} CU × ${a.hoursPerMonth} h × ${usd(PRICES.neonCompute.dollars)}), whatever the volume. At this run's figures that is the compute of ${floorJobs} jobs a month of the first row (${skiplock[0]!.name}): below that volume, the floor is what the compute costs, not the per-job line.
- Cloudflare Queues: ${count(PRICES.queuesOperations.includedPerMonth)} operations a month included with Workers Paid. Google Cloud Tasks: the first ${count(PRICES.cloudTasksOperations.includedPerMonth)} operations a month free.

## Assumptions and what is not counted

- Neon's compute: the database CPU per job over ${a.neonUtilisation * 100}% utilisation (Neon autoscales its compute to the load, but a compute is never busy all the time it runs), at 1 CU per vCPU. A CPU millisecond of this machine is taken as one of a Neon vCPU's, and workerd's CPU here as what Cloudflare would bill.
- Storage: a finished job keeps its row for the retention (${a.retentionDays} days by default), so a million jobs a month keep ${a.retentionDays}/${a.daysPerMonth} of their bytes all month; the WAL they write is kept for Neon's history window, ${a.restoreWindowDays} day${a.restoreWindowDays === 1 ? '' : 's'} by default on Launch (at most 7, ${NEON_HISTORY_WINDOW}).
- The WAL and the database CPU are read for the whole server: anything else using the same Postgres during the run is counted too. Take figures from a quiet machine.
- Cron invocations are priced as Worker requests (the pricing page names inbound requests only; counting them errs high). workerd's CPU includes the Durable Objects' own, which Cloudflare bills as duration, not CPU; it is priced as Worker CPU too (counted twice, so the figure errs high). The cron fires every second in the run, once a minute when deployed: more cron invocations per job than a deployed Worker makes.
- Not counted: Durable Object storage (the queue clock's state and the helpers' alarms), Neon's data transfer (100 GB a month included on Launch), and the Queues consumer's or the Cloud Tasks target's own compute.
- Prices are list prices in US dollars, before tax, for the plans named; Neon's compute price on its FAQ pages differs from its plans page, which is used (the higher).

## Reproduce

\`\`\`sh
JOBS=2000 npm run -s bench:workerd > /tmp/bench-workerd.json   # a run (NEON_PROXY_ROUND_TRIP_MS=50: a distant database)
npm run docs:cost -- /tmp/bench-workerd.json                 # keeps it as docs/cost-run.json, rewrites this page
npm run docs:cost                                            # after a price change: this page again from the kept run
\`\`\`

The prices are kept in one table, \`PRICES\` in [scripts/cost-model.ts](../scripts/cost-model.ts): change one
there, with the date you read it, and run \`npm run docs:cost\`. The run this page was computed from is
[cost-run.json](cost-run.json).
`;
}

function usd(dollars: number): string {
  if (dollars === 0) return '$0';
  if (dollars >= 100) return `$${Math.round(dollars).toLocaleString('en-US')}`;
  if (dollars >= 1) return `$${dollars.toFixed(2)}`;
  return `$${dollars.toPrecision(2)}`;
}

const usdOrUnknown = (dollars: number | undefined) => (dollars === undefined ? 'not measured' : usd(dollars));

/** A measured figure, to four significant figures with thousands separators. */
function figure(value: number | null): string {
  if (value === null) return 'not measured';
  return Number(value.toPrecision(4)).toLocaleString('en-US', { maximumFractionDigits: 10 });
}

const count = (value: number) => Math.round(value).toLocaleString('en-US');
