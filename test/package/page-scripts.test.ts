import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { PAGE_SCRIPTS_FILE, pageScriptsModule } from '../../scripts/build-browser';

describe("the pages' scripts", () => {
  it('are the bundle of their browser code as it is now (npm run build:browser rewrites them)', async () => {
    const committed = await readFile(PAGE_SCRIPTS_FILE, 'utf8');
    expect(committed, 'src/ui/page-scripts.generated.ts is stale: run npm run build:browser').toBe(
      await pageScriptsModule(),
    );
  });
});
