import { open, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { LOOPBACK } from './ports.js';
import { spawnProcessGroup, type ProcessGroup } from './processes.js';

export interface WranglerDevOptions {
  /** The folder with the wrangler config and node_modules. */
  projectRoot: string;
  port: number;
  /** The Worker's variables (see dev-vars-file.ts). */
  envFile: string;
  /** The project's own `.dev.vars`, read first so that `envFile` wins where both set a variable. */
  projectVarsFile?: string;
  /** More environment for wrangler itself (a Hyperdrive binding's local connection string). */
  environment?: Readonly<Record<string, string>>;
  /** Where local KV, D1, Durable Objects and caches live between runs. */
  persistTo: string;
  /** Receives wrangler's and the Worker's output, appended. */
  logFile: string;
}

export interface WranglerDev extends ProcessGroup {
  /** What wrangler has written to the log in this run. */
  output(): Promise<string>;
}

/**
 * Runs the Worker under `wrangler dev`, offline: no login, no telemetry, no
 * request to Cloudflare for `request.cf`, and no interactive hotkeys since
 * its stdin is not ours to give. The caller fires crons through
 * `/cdn-cgi/handler/scheduled`, which refuses requests from web pages; no
 * `--test-scheduled`, whose `/__scheduled` any page could fire.
 */
export async function startWranglerDev(options: WranglerDevOptions): Promise<WranglerDev> {
  const logStart = await sizeOf(options.logFile);
  const log = await open(options.logFile, 'a');
  try {
    await log.write(`\n--- wrangler dev, started by skiplock dev at ${new Date().toISOString()} ---\n`);
    const wrangler = await spawnProcessGroup(
      join(options.projectRoot, 'node_modules/.bin/wrangler'),
      [
        'dev',
        ...['--ip', LOOPBACK, '--port', String(options.port)],
        // With --env-file wrangler reads no .dev.vars by itself; of two files, the later wins.
        ...(options.projectVarsFile === undefined ? [] : ['--env-file', options.projectVarsFile]),
        ...['--env-file', options.envFile],
        ...['--persist-to', options.persistTo],
        // Port 0: the system's pick as the inspector binds. Left to itself wrangler picks 9229 (or the
        // next free one) and binds it a second or two later, so of two started together the later dies
        // (Address already in use 127.0.0.1:9229); the CLI offers no way to turn the inspector off.
        ...['--inspector-port', '0'],
        '--show-interactive-dev-session=false',
      ],
      {
        cwd: options.projectRoot,
        env: {
          ...process.env,
          ...options.environment,
          WRANGLER_SEND_METRICS: 'false',
          WRANGLER_SEND_ERROR_REPORTS: 'false',
          CLOUDFLARE_CF_FETCH_ENABLED: 'false',
          // The banner asks the npm registry whether wrangler is out of date.
          WRANGLER_HIDE_BANNER: 'true',
          // Plain text in the log file (wrangler still colours its error boxes).
          FORCE_COLOR: '0',
        },
        output: log.fd,
      },
    );
    const output = async () => (await readFile(options.logFile)).subarray(logStart).toString('utf8');
    return { ...wrangler, output };
  } finally {
    // The child holds its own copy of the descriptor.
    await log.close();
  }
}

async function sizeOf(path: string): Promise<number> {
  return stat(path).then(
    (stats) => stats.size,
    () => 0,
  );
}
