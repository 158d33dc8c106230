#!/usr/bin/env node
import { CONNECTION_USAGE } from './api-connection.js';
import { EXIT, usageFailure } from './cli-failure.js';
import { devCommand } from './dev.js';
import { eventsCommand } from './events.js';
import { jobTypesCommand } from './job-types.js';
import { jobsCommand } from './jobs.js';
import { keysCommand } from './keys.js';
import { migrateCommand } from './migrate.js';
import type { Command } from './operator-command.js';
import { concurrencyKeysCommand } from './concurrency-keys.js';
import { queuesCommand, statsCommand } from './queues.js';
import { runCli } from './run-cli.js';
import { tenantsCommand } from './tenants.js';
import { workCommand } from './work.js';
import { workersCommand } from './workers.js';

const COMMANDS: Record<string, Command> = {
  migrate: { run: migrateCommand, summary: 'apply the pending migrations to DATABASE_URL (safe to run twice)' },
  work: { run: workCommand, summary: 'run a Node worker for the jobs your modules export: skiplock work ./jobs.js' },
  dev: {
    run: devCommand,
    summary:
      "run this folder's Worker locally: Postgres, migrations, wrangler dev, cron drains (--print-config: the lines to run wrangler yourself)",
  },
  jobs: {
    run: jobsCommand,
    summary:
      'jobs list | get JOB_ID [--wait] | retry JOB_ID | reschedule JOB_ID | cancel JOB_ID | bulk ACTION [filter] [--dry-run]',
  },
  workers: { run: workersCommand, summary: 'workers release WORKER: hand back the jobs a crashed worker holds' },
  queues: {
    run: queuesCommand,
    summary:
      'job counts per queue and status | get QUEUE | set QUEUE [--concurrency N] [--rate-limit C/S] [--weight N]',
  },
  'job-types': {
    run: jobTypesCommand,
    summary: "job-types list | set TYPE --retention SECONDS|none|default|definition: a job type's retention",
  },
  stats: { run: statsCommand, summary: 'job counts per queue, tenant and status, and the queue health' },
  'concurrency-keys': {
    run: concurrencyKeysCommand,
    summary: 'concurrency-keys list [--blocked] | unblock KEY: keys in use, and ordering keys a failed job holds',
  },
  tenants: {
    run: tenantsCommand,
    summary: 'tenants get TENANT | set TENANT [--concurrency N] [--rate-limit C/S] [--weight N]',
  },
  events: {
    run: eventsCommand,
    summary: 'events send EVENT [--key K] [--payload JSON]: resume the jobs waiting for it',
  },
  keys: { run: keysCommand, summary: 'keys create --name N --scope S | list | revoke KEY_ID' },
};

const HELP = [
  'usage: skiplock <command> [options]',
  ...Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(8)} ${command.summary}`),
  '',
  `jobs, workers, queues, job-types, stats, concurrency-keys, tenants, events and keys call a skiplock API: ${CONNECTION_USAGE}.`,
  `Exit codes: ${Object.entries(EXIT)
    .map(([kind, code]) => `${code} ${kind.replace(/[A-Z]/g, (letter) => ` ${letter.toLowerCase()}`)}`)
    .join(', ')}.`,
].join('\n');

const [name, ...args] = process.argv.slice(2);

if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
  console.log(HELP);
} else {
  const command = COMMANDS[name];
  runCli(`skiplock ${name}`, async () => {
    if (command === undefined)
      throw usageFailure(`unknown command; commands: ${Object.keys(COMMANDS).join(', ')} (skiplock help)`);
    await command.run(args);
  });
}
