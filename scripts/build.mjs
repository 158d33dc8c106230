// `npm run build` (and `npm pack`, through prepack): the pages' scripts
// bundled again (scripts/build-browser.ts), then the package's dist/,
// compiled by tsc from src/ without the local stack, with an executable bin.
import { execFileSync } from 'node:child_process';
import { chmodSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, ['--import', 'tsx', 'scripts/build-browser.ts'], { stdio: 'inherit' });
rmSync('dist', { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
chmodSync('dist/cli/main.js', 0o755);
