import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { projectRoot } from './repository-root';

/** The package's CLI compiled from this checkout's sources, for a test file that runs it many times. */
export interface CompiledCli {
  /** The bin's entry: run it as `node <main> ...`. */
  main: string;
  remove(): Promise<void>;
}

/**
 * Compiles src/ file by file into plain JavaScript, laid out as `npm run build`
 * lays out dist/ (one module per source file, the migrations beside it), with
 * esbuild, the compiler tsx runs on each start. A run of the CLI then starts
 * in plain Node: about a third of the CPU of `node --import tsx
 * src/cli/main.ts`, which counts in a file that runs it dozens of times. It
 * goes under the project's git-ignored .scratch, where the packages it
 * imports resolve from node_modules.
 */
export async function compileCli(): Promise<CompiledCli> {
  await mkdir(join(projectRoot, '.scratch'), { recursive: true });
  const dir = await mkdtemp(join(projectRoot, '.scratch', 'cli-'));
  await build({
    entryPoints: [join(projectRoot, 'src/**/*.ts'), join(projectRoot, 'src/**/*.tsx')],
    outbase: join(projectRoot, 'src'),
    outdir: join(dir, 'src'),
    format: 'esm',
    platform: 'node',
    tsconfig: join(projectRoot, 'tsconfig.json'),
    logLevel: 'warning',
  });
  await writeFile(join(dir, 'package.json'), '{ "type": "module" }\n');
  await symlink(join(projectRoot, 'migrations'), join(dir, 'migrations'));
  return {
    main: join(dir, 'src/cli/main.js'),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
