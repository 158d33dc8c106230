import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

/** Applies skiplock's migrations to EXAMPLE_DATABASE_URL with the package's own CLI, as a user deploying would. */
export default function setup(project: TestProject): void {
  const databaseUrl = process.env.EXAMPLE_DATABASE_URL;
  if (!databaseUrl) throw new Error('set EXAMPLE_DATABASE_URL to an empty Postgres database for the example to use');
  execFileSync('npx', ['skiplock', 'migrate', '--database-url', databaseUrl], { stdio: 'inherit' });
  project.provide('databaseUrl', databaseUrl);
}
