import type { ScenarioFigures } from './report';

export interface RunFacts {
  date: string;
  machine: string;
  postgres: string;
  seconds: number;
}

/**
 * Scenarios 1 to 8 of issue 7, 9 of issue 16, 10 of issue 37, 11 to 13 (durable steps, events, child jobs),
 * 14 to 17 of issue 40 (concurrency keys, ordering keys, debounce, rate keys), 18 of issue 41 (retention, dead letters),
 * 19 (queue rate limits), 20 of issue 41 (bulk actions) and 21 of issue 42 (the queue clock): the report is written
 * when all of them ran.
 */
export const SCENARIOS = 21;

function cell(text: string | number): string {
  return String(text).replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** docs/reliability.md: the table, the notes per scenario, and what the run was. */
export function reliabilityReport(figures: readonly ScenarioFigures[], run: RunFacts): string {
  const rows = [...figures].sort((a, b) => a.scenario - b.scenario);
  return [
    '# Reliability under faults',
    '',
    'Written by `npm run test:faults` (test/faults/): each scenario injects real faults into real',
    'processes and a real Postgres, then counts from the jobs, the finished jobs and `skiplock.job_events`:',
    '',
    '- **jobs lost**: jobs (or acknowledged enqueues and completions) that did not end as they must, and',
    '  (scenario 18) finished jobs pruned inside their retention or failures not moved once to their dead-letter queue,',
    '  and (scenario 20) jobs both cancelled by a bulk action and completed, or neither, redriven jobs not run again to',
    '  success, or jobs a bulk delete removed that had not succeeded before its cut-off or whose events it left;',
    '- **run twice at once**: jobs with two overlapping runs, a run being the interval from its claim',
    '  (`started_at`) to the completion or the `released`, `failed`, `cancelled` or `lease_expired` event that ends it',
    "  (scenario 10: from the handlers' own record of when their work began and stopped, which a hand-back cannot end);",
    '- **limit violations**: tenant concurrency above its limit (sampled from the database every few',
    '  milliseconds and from the run intervals), jobs started beyond a rate limit, periodic ticks enqueued twice,',
    "  hand-backs of a worker's jobs by anyone but that worker, jobs of a concurrency key above its limit,",
    '  jobs of an ordering key started before an earlier one of it had succeeded or two of a key at once',
    "  (scenarios 14 and 15: sampled, and from the handlers' own record of each attempt's work), a burst of",
    '  debounced enqueues that made more than one job or ran without its last payload (scenario 16), and windows',
    "  in which a rate key started more jobs than its limit (scenario 17: from each start's own time, recorded in",
    "  the claim's transaction), and finished jobs past their retention left behind once the sweeps found nothing",
    '  more or jobs moved to a dead-letter queue that should not have been (scenario 18), and windows in which a',
    '  queue started more jobs, all tenants together, than its rate limit (scenario 19, as scenario 17), bulk',
    '  actions whose count disagrees with the jobs the database shows they changed, rescheduled jobs started before',
    '  their new time, or finished jobs a bulk delete left behind (scenario 20), and jobs or retries first started',
    '  more than one cron period and 0.5 s past their due time or, when later, the answer to their write (scenario 21).',
    '',
    `Run of ${run.date} on ${run.machine}, against ${run.postgres}; the suite took ${run.seconds} s.`,
    "Loads are scaled down from the issue's figures so the suite fits in a few minutes on 2 cores.",
    '',
    '| # | scenario | load | faults injected | jobs lost | jobs run twice at once | limit violations | recovery time |',
    '| --- | --- | --- | --- | ---: | ---: | ---: | --- |',
    ...rows.map(
      (row) =>
        `| ${row.scenario} | ${cell(row.name)} | ${cell(row.load)} | ${cell(row.faults)} | ${row.jobsLost} | ${row.runTwiceAtOnce} | ${row.limitViolations} | ${cell(row.recovery)} |`,
    ),
    '',
    '## Notes',
    '',
    ...rows.flatMap((row) => [`${row.scenario}. **${row.name}**`, ...row.notes.map((note) => `   - ${note}`), '']),
  ].join('\n');
}
