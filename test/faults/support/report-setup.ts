import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { projectRoot } from '../../support/repository-root';
import { reliabilityReport, SCENARIOS } from './report-table';
import type { ScenarioFigures } from './report';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where each scenario leaves its figures (one JSON file each) for the report. */
    faultsReportDir: string;
  }
}

/**
 * Collects the scenarios' figures and, when the run ends, writes the report:
 * to the temporary folder, or over docs/reliability.md with
 * UPDATE_RELIABILITY_REPORT=1 (a run that should refresh the published
 * figures). Scenario files run in their own workers, so the figures travel
 * through files.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-faults-'));
  project.provide('faultsReportDir', dir);
  const startedAt = Date.now();
  return async () => {
    const files = (await readdir(dir)).filter((name) => name.endsWith('.json'));
    const figures = await Promise.all(
      files.map(async (name) => JSON.parse(await readFile(join(dir, name), 'utf8')) as ScenarioFigures),
    );
    await rm(dir, { recursive: true, force: true });
    // A run of some scenario files only (while working on one) leaves the full report alone.
    if (figures.length < SCENARIOS) {
      console.log(`faults: ${figures.length} of ${SCENARIOS} scenarios ran; no report written`);
      return;
    }
    const machine = `${availableParallelism()} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}`;
    const postgres = process.env.DATABASE_URL ? 'DATABASE_URL' : 'an embedded Postgres';
    const report = reliabilityReport(figures, {
      date: new Date().toISOString().slice(0, 10),
      machine,
      postgres,
      seconds: Math.round((Date.now() - startedAt) / 1000),
    });
    const published = process.env.UPDATE_RELIABILITY_REPORT === '1';
    const file = published ? join(projectRoot, 'docs/reliability.md') : join(tmpdir(), 'skiplock-reliability.md');
    await writeFile(file, report);
    console.log(`faults: ${figures.length} scenarios; report written to ${file}`);
  };
}
