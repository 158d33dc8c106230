import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { CostInputs } from '../../bench/cost-inputs';
import {
  ASSUMPTIONS,
  type BenchOutput,
  cloudTasksLines,
  costPage,
  PRICES,
  queuesLines,
  skiplockLines,
  total,
} from '../../scripts/cost-model';
import { benchOutput, COST_PAGE, COST_RUN } from '../../scripts/cost-page';

/** A real run's `costInputs` (JOBS=2000 npm run bench:workerd, 2026-11-28, on a loaded machine). */
const fixture = async (): Promise<BenchOutput> =>
  JSON.parse(await readFile(new URL('./cost-page.fixture.json', import.meta.url), 'utf8')) as BenchOutput;

/** A million jobs' bill worked out here again, term by term, from the inputs and the prices. */
function expectedSkiplock(inputs: CostInputs): Record<string, number> {
  const requests = inputs.workerRequestsPerJob.http + inputs.workerRequestsPerJob.cron;
  const objectRequests =
    inputs.durableObjectRequestsPerJob.clock +
    inputs.durableObjectRequestsPerJob.helperStarts +
    inputs.durableObjectRequestsPerJob.helperAlarms;
  const activeMs = inputs.durableObjectActiveMsPerJob.clock + inputs.durableObjectActiveMsPerJob.helpers;
  // Per million jobs, a price per million units is the per-job count times the price.
  return {
    requests: requests * PRICES.workersRequests.dollars,
    cpu: inputs.workerdCpuMsPerJob * PRICES.workersCpu.dollars,
    objectRequests: objectRequests * PRICES.durableObjectRequests.dollars,
    objectDuration: (activeMs / 1000) * 0.128 * PRICES.durableObjectDuration.dollars,
    // ms per job × a million jobs = seconds × 1,000; CU-hours at 50% busy.
    neonCompute: (((inputs.databaseCpuMsPerJob ?? Number.NaN) * 1000) / 3600 / 0.5) * PRICES.neonCompute.dollars,
    // bytes per job × a million = MB; kept 7 days of a 30-day month.
    neonStorage: (inputs.bytesPerJob.tablesAndIndexes / 1000) * (7 / 30) * PRICES.neonStorage.dollars,
    // WAL kept 1 day.
    neonHistory: (inputs.bytesPerJob.wal / 1000) * (1 / 30) * PRICES.neonInstantRestore.dollars,
  };
}

const sum = (values: Record<string, number>) => Object.values(values).reduce((a, b) => a + b, 0);

describe('the cost page (npm run docs:cost)', () => {
  it('is the page its kept run and the prices make (npm run docs:cost rewrites it)', async () => {
    const run = benchOutput(await readFile(COST_RUN, 'utf8'));
    expect(await readFile(COST_PAGE, 'utf8')).toBe(costPage(run));
  });

  it('makes the same page from the same run every time', async () => {
    const run = await fixture();
    expect(costPage(run)).toBe(costPage(structuredClone(run)));
  });

  it('prices each line as the measured figure times the published price', async () => {
    const { costInputs } = await fixture();
    expect(ASSUMPTIONS).toMatchObject({
      neonUtilisation: 0.5,
      retentionDays: 7,
      restoreWindowDays: 1,
      daysPerMonth: 30,
    });
    for (const workload of [costInputs.noop, costInputs.io, costInputs.singleEnqueues]) {
      const lines = skiplockLines(workload);
      const expected = expectedSkiplock(workload);
      expect(lines.map((line) => line.dollars)).toEqual(
        Object.values(expected).map((dollars) => expect.closeTo(dollars, 12)),
      );
      expect(total(lines)).toBeCloseTo(sum(expected), 12);
    }
    // Queues: a write, a read and a delete per message; Cloud Tasks: the creation and one delivery.
    expect(total(queuesLines())).toBeCloseTo(3 * PRICES.queuesOperations.dollars, 12);
    expect(total(cloudTasksLines())).toBeCloseTo(2 * PRICES.cloudTasksOperations.dollars, 12);
  });

  it('shows the totals and says whether no-op jobs cost less than on Cloudflare Queues', async () => {
    const run = await fixture();
    const page = costPage(run);
    const noop = sum(expectedSkiplock(run.costInputs.noop));
    const queues = 3 * PRICES.queuesOperations.dollars;
    expect(noop).toBeLessThan(queues);
    expect(page).toContain(
      `| no-op jobs, enqueued 1,000 a request | skiplock: Workers Paid + Neon Launch | $${noop.toPrecision(2)} |`,
    );
    expect(page).toContain(
      `| messages of at most 64 KB | Cloudflare Queues (operations only) | $${queues.toFixed(2)} |`,
    );
    expect(page).toContain(`**met**: $${noop.toPrecision(2)} against $${queues.toFixed(2)}`);
    expect(page).toContain(run.costInputs.command);
    for (const price of Object.values(PRICES)) expect(page).toContain(price.source);

    const dearer = structuredClone(run);
    dearer.costInputs.noop.workerdCpuMsPerJob = 100; // $2 of CPU per million
    expect(costPage(dearer)).toMatch(/\*\*not met\*\*: \$2\.\d\d against \$1\.20/);
  });

  it('leaves what a run could not measure out of the total, and the target undecided', async () => {
    const run = await fixture();
    run.costInputs.noop.databaseCpuMsPerJob = null;
    const lines = skiplockLines(run.costInputs.noop);
    expect(lines.find((line) => line.price === PRICES.neonCompute)?.dollars).toBeUndefined();
    expect(total(lines)).toBeUndefined();
    const page = costPage(run);
    expect(page).toContain('**not decided**');
    expect(page).toContain(
      '| no-op jobs, enqueued 1,000 a request | skiplock: Workers Paid + Neon Launch | not measured |',
    );
  });

  it("reads the benchmark's JSON after npm's own lines, and refuses output without cost inputs", async () => {
    const run = await fixture();
    const printed = `\n> skiplock@0.1.0 bench:workerd\n> tsx bench/worker-runtime.ts\n\n${JSON.stringify(run, null, 2)}\n`;
    expect(benchOutput(printed)).toEqual(run);
    expect(() => benchOutput(JSON.stringify({ networkDelay: run.networkDelay }))).toThrow(/no costInputs/);
    expect(() => benchOutput('serial {}')).toThrow(/no JSON object/);
  });

  it('prices the run at 0 ms of a benchmark run at several round trips', async () => {
    const run = await fixture();
    const far = { ...run, networkDelay: { roundTripMs: 50, jitterMs: 0 } };
    const near = { ...run, networkDelay: { roundTripMs: 0, jitterMs: 0 } };
    expect(benchOutput(JSON.stringify({ runs: [far, near], targets: [] }))).toEqual(near);
  });
});
