/**
 * The package's public surface, one API Extractor report per entry of
 * package.json's "exports" in api/ (api/skiplock-drain.api.md is what
 * `import ... from 'skiplock/drain'` gives a user: every exported name with
 * its declaration, and the declarations those refer to that no entry
 * exports). A change to an entry's surface shows in review as a change to
 * its report.
 *
 *   npm run api:check     (CI: fails, naming the entries, when a report is not the surface)
 *   npm run api:update    (rewrites the reports: commit them with the change)
 *
 * It compiles the declarations from src/ with tsconfig.build.json, as
 * `npm run build` does for dist/, into a temporary folder.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig, ExtractorLogLevel, type ExtractorMessage } from '@microsoft/api-extractor';

const projectRoot = fileURLToPath(new URL('..', import.meta.url));
const update = process.argv.includes('--update');

const QUIET = new Set<string>([
  'console-api-report-changed',
  'console-api-report-copied',
  'console-api-report-created',
  'console-api-report-not-copied',
  'console-compiler-version-notice',
  'console-preamble',
]);

interface Manifest {
  exports: Record<string, { types: string } | string>;
}

/** Each entry's report name (`skiplock-drain` for `./drain`) and its declarations under dist/. */
function entries(): { report: string; types: string }[] {
  const manifest = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as Manifest;
  return Object.entries(manifest.exports).flatMap(([subpath, target]) =>
    typeof target === 'string'
      ? []
      : [
          {
            report: subpath === '.' ? 'skiplock' : `skiplock-${subpath.slice(2).replaceAll('/', '-')}`,
            types: target.types,
          },
        ],
  );
}

/** The declarations of src/, as the build emits them into dist/, in `outDir`. */
function emitDeclarations(outDir: string): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--emitDeclarationOnly', '--outDir', outDir], {
    cwd: projectRoot,
    stdio: 'inherit',
  });
}

/**
 * Whether the entry's report matches its surface (after rewriting it, with
 * --update). `workFolder` holds the declarations in dist/ beside a copy of
 * package.json, so the report names their files from there
 * (`dist/http/context.d.ts`), the same in any checkout.
 */
function report(entry: { report: string; types: string }, workFolder: string): boolean {
  const entryPoint = join(workFolder, entry.types);
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: workFolder,
      mainEntryPointFilePath: entryPoint,
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            lib: ['ES2023'],
            types: ['@cloudflare/workers-types', 'node'],
            strict: true,
            skipLibCheck: true,
          },
          files: [entryPoint],
        },
      },
      apiReport: {
        enabled: true,
        reportFileName: entry.report,
        reportFolder: join(projectRoot, 'api'),
        reportTempFolder: join(workFolder, 'reports'),
        // A type a user meets but cannot import is in the report too, so a change to it shows.
        includeForgottenExports: true,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
        // No release tags (@public, @beta): every export of an entry is public.
        extractorMessageReporting: {
          default: { logLevel: ExtractorLogLevel.Warning },
          'ae-missing-release-tag': { logLevel: ExtractorLogLevel.None, addToApiReportFile: false },
          'ae-forgotten-export': { logLevel: ExtractorLogLevel.None, addToApiReportFile: true },
          'ae-undocumented': { logLevel: ExtractorLogLevel.None, addToApiReportFile: false },
        },
        // The comments are for readers, not TSDoc.
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(workFolder, 'package.json'),
  });
  const result = Extractor.invoke(config, {
    localBuild: update,
    // What changed, as a diff of the report, in the check's output.
    printApiReportDiff: !update,
    messageCallback: (message: ExtractorMessage) => {
      // Said once, below, for all entries: which reports changed; not the bundled TypeScript's version.
      if (QUIET.has(message.messageId)) message.logLevel = ExtractorLogLevel.None;
    },
  });
  if (result.errorCount > 0)
    throw new Error(`API Extractor failed on ${entry.types} (${result.errorCount} errors, above)`);
  return !result.apiReportChanged;
}

const workFolder = mkdtempSync(join(tmpdir(), 'skiplock-api-'));
try {
  emitDeclarations(join(workFolder, 'dist'));
  copyFileSync(join(projectRoot, 'package.json'), join(workFolder, 'package.json'));
  const changed = entries().filter((entry) => !report(entry, workFolder));
  if (changed.length === 0) {
    console.log(`api: ${entries().length} entries match their reports in api/`);
  } else if (update) {
    console.log(`api: rewrote ${changed.map((entry) => `api/${entry.report}.api.md`).join(', ')}`);
  } else {
    console.error(
      `api: the public surface of ${changed.map((entry) => entry.report.replace('-', '/')).join(', ')} is not its report in api/: ` +
        'if the change is meant, run npm run api:update and commit the reports',
    );
    process.exitCode = 1;
  }
} finally {
  rmSync(workFolder, { recursive: true, force: true });
}
