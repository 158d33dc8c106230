import { readFileSync } from 'node:fs';

/** The version in an installed package's package.json; this repository's own when `name` is left out. */
export function readPackageVersion(name?: string): string {
  const path = name === undefined ? '../../package.json' : `../../node_modules/${name}/package.json`;
  const manifest = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}
