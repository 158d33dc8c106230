#!/usr/bin/env node
import { migrateCommand } from './migrate.js';
import { runCli } from './run-cli.js';
import { workCommand } from './work.js';

const COMMANDS: Record<string, { run(args: string[]): Promise<void>; summary: string }> = {
  migrate: { run: migrateCommand, summary: 'apply the pending migrations to DATABASE_URL (safe to run twice)' },
  work: { run: workCommand, summary: 'run a Node worker for the jobs your modules export: skiplock work ./jobs.js' },
};

const HELP = [
  'usage: skiplock <command> [options]',
  ...Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(8)} ${command.summary}`),
].join('\n');

const [name, ...args] = process.argv.slice(2);

if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
  console.log(HELP);
} else {
  const command = COMMANDS[name];
  runCli(`skiplock ${name}`, async () => {
    if (command === undefined) throw new Error(`unknown command; commands: ${Object.keys(COMMANDS).join(', ')} (skiplock help)`);
    await command.run(args);
  });
}
