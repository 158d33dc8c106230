import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inject } from 'vitest';

/** One row of docs/reliability.md: what a scenario did and what it counted. */
export interface ScenarioFigures {
  /** 1 to 8, as in issue 7. */
  scenario: number;
  name: string;
  load: string;
  faults: string;
  jobsLost: number;
  runTwiceAtOnce: number;
  limitViolations: number;
  /** How recovery is measured differs per scenario; the text says what it is. */
  recovery: string;
  /** Other figures worth a line under the table (throughput, counts). */
  notes: string[];
}

/** Prints the scenario's figures and keeps them for the report. */
export async function recordScenario(figures: ScenarioFigures): Promise<void> {
  const lines = [
    `scenario ${figures.scenario}: ${figures.name}`,
    `  load: ${figures.load}`,
    `  faults: ${figures.faults}`,
    `  lost ${figures.jobsLost}, run twice at once ${figures.runTwiceAtOnce}, limit violations ${figures.limitViolations}`,
    `  recovery: ${figures.recovery}`,
    ...figures.notes.map((note) => `  ${note}`),
  ];
  console.log(lines.join('\n'));
  await writeFile(join(inject('faultsReportDir'), `${figures.scenario}.json`), JSON.stringify(figures));
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
