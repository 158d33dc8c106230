import { execFile } from 'node:child_process';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { fileExists } from './file-exists.js';

/** What `skiplock dev` needs from the project's wrangler config. */
export interface WranglerConfig {
  /** The config file's path. */
  readonly file: string;
  /** `triggers.crons`: the schedule the Worker's drain fires on. */
  readonly crons: readonly string[];
  /** The names of its Durable Object bindings. */
  readonly durableObjects: readonly string[];
  /** The names of its Hyperdrive bindings. */
  readonly hyperdrives: readonly string[];
}

/** Wrangler's own order of preference when a folder has more than one. */
const CONFIG_FILES = ['wrangler.json', 'wrangler.jsonc', 'wrangler.toml'];

// Wrangler's own reader, so the config is read as `wrangler deploy` reads it.
// It runs in a child process because importing wrangler installs signal
// handlers of its own in the importing process; and in the project's folder,
// so it is the project's own wrangler. Wrangler may log warnings on stdout:
// the answer is the last line.
const PRINT_CONFIG = `
let wrangler;
try {
  wrangler = await import('wrangler');
} catch {
  process.stderr.write('WRANGLER_MISSING');
  process.exit(1);
}
try {
  const config = wrangler.unstable_readConfig({ config: process.argv[1] });
  const answer = {
    crons: config.triggers.crons ?? [],
    durableObjects: (config.durable_objects?.bindings ?? []).map((binding) => binding.name),
    hyperdrives: (config.hyperdrive ?? []).map((binding) => binding.binding),
  };
  process.stdout.write('\\n' + JSON.stringify(answer));
} catch (error) {
  process.stderr.write(error.message);
  process.exitCode = 1;
}
`;

/** The project's wrangler config file, or a one-line refusal when the folder has none. */
export async function findWranglerConfig(projectDir: string): Promise<string> {
  for (const name of CONFIG_FILES) {
    const file = join(projectDir, name);
    if (await fileExists(file)) return file;
  }
  throw new Error(
    `no wrangler.jsonc, wrangler.json or wrangler.toml in ${projectDir}: run skiplock dev in your Worker's folder, or pass --cwd`,
  );
}

/** The project's wrangler config, read by the project's wrangler. */
export async function readWranglerConfig(projectDir: string): Promise<WranglerConfig> {
  const file = await findWranglerConfig(projectDir);
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '--eval', PRINT_CONFIG, file],
      { cwd: projectDir },
    );
    const answer = JSON.parse(stdout.trim().split('\n').at(-1)!) as Omit<WranglerConfig, 'file'>;
    return { file, ...answer };
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    if (stderr === 'WRANGLER_MISSING') {
      throw new Error(`wrangler is not installed in ${projectDir}: npm install -D wrangler`, { cause: error });
    }
    const reason = (stderr || (error as Error).message).replace(/\s+/g, ' ');
    throw new Error(`cannot read ${basename(file)}: ${reason}`, { cause: error });
  }
}
