/**
 * docs/cost.md, from the JSON one run of `npm run bench:workerd` printed and
 * the prices in scripts/cost-model.ts. The run's JSON is kept beside the page
 * (docs/cost-run.json), so a price change alone regenerates it from the same
 * run; test/package/cost-page.test.ts fails when the page and the two differ.
 *
 *   JOBS=2000 npm run -s bench:workerd > /tmp/bench-workerd.json
 *   npm run docs:cost -- /tmp/bench-workerd.json   # a new run (`-` reads standard input)
 *   npm run docs:cost                              # new prices, the kept run
 */
import { readFile, writeFile } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import { type BenchOutput, costPage } from './cost-model';

export const COST_PAGE = new URL('../docs/cost.md', import.meta.url);
export const COST_RUN = new URL('../docs/cost-run.json', import.meta.url);

/**
 * The benchmark's JSON object out of what it printed; `npm run` without `-s`
 * puts its own lines first. A run too old to print `costInputs` is refused.
 */
export function benchOutput(printed: string): BenchOutput {
  const start = printed.search(/^\{/m);
  if (start < 0) throw new Error('no JSON object found: give the output of `npm run -s bench:workerd`');
  const whole = JSON.parse(printed.slice(start)) as Partial<BenchOutput> & { runs?: Partial<BenchOutput>[] };
  // A run at several round trips: the page prices the one at 0 ms (the database next to the Worker), else the first.
  const parsed = whole.runs?.find((run) => run.networkDelay?.roundTripMs === 0) ?? whole.runs?.[0] ?? whole;
  if (parsed.costInputs === undefined || parsed.networkDelay === undefined)
    throw new Error('this output has no costInputs: run `npm run bench:workerd` from this version again');
  return parsed as BenchOutput;
}

async function main(): Promise<void> {
  const source = process.argv[2];
  if (source !== undefined) {
    const printed = source === '-' ? await text(process.stdin) : await readFile(source, 'utf8');
    await writeFile(COST_RUN, `${JSON.stringify(benchOutput(printed), null, 2)}\n`);
    console.log(`wrote ${COST_RUN.pathname}`);
  }
  await writeFile(COST_PAGE, costPage(benchOutput(await readFile(COST_RUN, 'utf8'))));
  console.log(`wrote ${COST_PAGE.pathname}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
