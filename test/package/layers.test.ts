import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/repository-root';

/** Every source file under src/, relative to the project. */
function sourceFiles(dir = join(projectRoot, 'src')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.test.ts') ? [relative(projectRoot, path)] : [];
  });
}

/** The project files a source file imports by relative path (`./x.js` is the source `./x.ts`). */
function relativeImports(file: string): string[] {
  const text = readFileSync(join(projectRoot, file), 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((match) =>
    relative(projectRoot, resolve(dirname(join(projectRoot, file)), match[1]!.replace(/\.js$/, '.ts'))),
  );
}

/** The project files a source file re-exports (`export ... from './x.js'`). */
function reExports(file: string): string[] {
  const text = readFileSync(join(projectRoot, file), 'utf8');
  return [...text.matchAll(/export\s+(?:type\s+)?(?:\*|\{[^}]*\})\s+from\s+'(\.{1,2}\/[^']+)'/g)].map((match) =>
    relative(projectRoot, resolve(dirname(join(projectRoot, file)), match[1]!.replace(/\.js$/, '.ts'))),
  );
}

/** The source file of each package entry, by name (`skiplock/drain`), as tsconfig.json's "paths" maps it. */
function entrySources(): Record<string, string> {
  // tsconfig.json has comments: read only its "paths" object, which has none.
  const tsconfig = readFileSync(join(projectRoot, 'tsconfig.json'), 'utf8');
  const paths = JSON.parse(/"paths": (\{[^}]*\})/.exec(tsconfig)![1]!) as Record<string, [string]>;
  return Object.fromEntries(Object.entries(paths).map(([name, [source]]) => [name, source.replace(/^\.\//, '')]));
}

/** The layer of a file: its folder under src/ (src/worker.ts is the reference deployment). */
function layerOf(file: string): string {
  const layer = file.split('/')[1]!;
  return layer === 'worker.ts' ? 'deployment' : layer.replace(/\.tsx?$/, '');
}

/** What each layer may import besides itself. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  db: [],
  engine: ['db'],
  migrate: ['db'],
  drain: ['db', 'engine'],
  http: ['db', 'engine'],
  ui: ['db', 'engine', 'http'],
  worker: ['db', 'engine', 'drain', 'http', 'ui'],
  'node-worker': ['db', 'engine', 'drain'],
  index: ['db', 'engine'],
  // `skiplock dev` runs the local stack.
  cli: ['db', 'engine', 'drain', 'node-worker', 'migrate', 'http', 'local'],
  // npm start checks the Worker's settings it passes on before it starts anything.
  local: ['db', 'engine', 'drain', 'http', 'migrate', 'cli', 'worker'],
  deployment: [],
};

describe('the source layers', () => {
  it('import one way: db <- engine <- drain, http <- ui <- worker; drain <- node-worker <- cli; http <- cli', () => {
    const wrong = sourceFiles().flatMap((file) =>
      relativeImports(file)
        .filter((target) => layerOf(target) !== layerOf(file) && !MAY_IMPORT[layerOf(file)]!.includes(layerOf(target)))
        .map((target) => `${file} -> ${target}`),
    );
    expect(wrong).toEqual([]);
  });

  it("the Node worker reaches the engine, the drain and the pg driver only through their index (public) and internal (the package's own) modules", () => {
    const entries = [
      'src/engine/index.ts',
      'src/engine/internal.ts',
      'src/drain/index.ts',
      'src/drain/internal.ts',
      'src/db/pg.ts',
    ];
    const reaching = sourceFiles()
      .filter((file) => layerOf(file) === 'node-worker')
      .flatMap((file) => relativeImports(file).map((target) => `${file} -> ${target}`))
      .filter((edge) => !edge.split(' -> ')[1]!.startsWith('src/node-worker/'))
      .filter((edge) => !entries.includes(edge.split(' -> ')[1]!));
    expect(reaching).toEqual([]);
  });

  it('no package entry re-exports an internal module, directly or through another module it re-exports', () => {
    const reached = Object.entries(entrySources()).flatMap(([name, source]) => {
      const seen = new Set<string>();
      const visit = (file: string): void => {
        if (seen.has(file)) return;
        seen.add(file);
        reExports(file).forEach(visit);
      };
      visit(source);
      expect(seen.size, name).toBeGreaterThan(0);
      return [...seen].filter((file) => file.endsWith('/internal.ts')).map((file) => `${name} -> ${file}`);
    });
    expect(reached).toEqual([]);
  });

  it('the reference deployment imports only the published package', () => {
    const text = readFileSync(join(projectRoot, 'src/worker.ts'), 'utf8');
    const specifiers = [...text.matchAll(/from '([^']+)'/g)].map((match) => match[1]!);
    expect(specifiers.length).toBeGreaterThan(0);
    expect(specifiers.filter((specifier) => !specifier.startsWith('skiplock'))).toEqual([]);
  });

  it('each package entry is the build of the source that tsconfig paths resolve it to', () => {
    const manifest = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
      exports: Record<string, { types: string; import: string } | string>;
    };
    const sources = entrySources();
    const entries = Object.entries(manifest.exports).filter(([subpath]) => subpath !== './package.json');
    expect(entries.length).toBe(Object.keys(sources).length);
    for (const [subpath, target] of entries) {
      const name = subpath === '.' ? 'skiplock' : `skiplock/${subpath.slice(2)}`;
      const built = `./${sources[name]!.replace('src/', 'dist/').replace(/\.ts$/, '')}`;
      expect(target, name).toEqual({ types: `${built}.d.ts`, import: `${built}.js` });
    }
  });
});
