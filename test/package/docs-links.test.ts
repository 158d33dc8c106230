import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/repository-root';

/** The documents whose links must resolve: the README, docs/ and below, the changelog, the examples' and migrations' READMEs. */
function documents(): string[] {
  const underDocs = (dir: string): string[] =>
    readdirSync(join(projectRoot, dir), { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return underDocs(path);
      return entry.name.endsWith('.md') ? [path] : [];
    });
  const examples = readdirSync(join(projectRoot, 'examples')).map((example) => join('examples', example, 'README.md'));
  return ['README.md', 'CHANGELOG.md', 'migrations/README.md', ...examples, ...underDocs('docs')].filter((file) =>
    existsSync(join(projectRoot, file)),
  );
}

/** The text outside fenced code blocks. */
function outsideCodeBlocks(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** The text outside code blocks and inline code spans, where a `[text](target)` is a link. */
function prose(markdown: string): string {
  return outsideCodeBlocks(markdown).replace(/`[^`\n]*`/g, '');
}

/** Each heading's anchor, as GitHub makes them: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of outsideCodeBlocks(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

/** Every relative link (and image) of a document that points at no file, or at no heading of the file it names. */
function brokenLinks(file: string, markdown: string, read: (path: string) => string | undefined): string[] {
  const broken: string[] = [];
  for (const [, target] of prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
    const [path, anchor] = target!.split('#', 2) as [string, string | undefined];
    const into =
      path === '' ? file : relative(projectRoot, resolve(projectRoot, dirname(file), decodeURIComponent(path)));
    const text = read(into);
    if (text === undefined) {
      broken.push(`${file}: ${target} (no file ${into})`);
    } else if (anchor !== undefined && anchor !== '' && !anchors(text).has(anchor)) {
      broken.push(`${file}: ${target} (no heading #${anchor} in ${into})`);
    }
  }
  return broken;
}

/** A file's text, '' for a directory, undefined when there is none. */
function readProjectFile(path: string): string | undefined {
  const full = join(projectRoot, path);
  if (!existsSync(full)) return undefined;
  return statSync(full).isDirectory() ? '' : readFileSync(full, 'utf8');
}

describe('the links of the README and docs/', () => {
  it('point at files that exist, and at headings those files have', () => {
    const files = documents();
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/performance.md', 'docs/configuration.md']));
    const broken = files.flatMap((file) => brokenLinks(file, readProjectFile(file)!, readProjectFile));
    expect(broken).toEqual([]);
  });

  it('are found broken when a file or a heading is missing, and not inside code', () => {
    const pages: Record<string, string> = {
      'docs/a.md': '# Page A\n\n## The `http` job\n\n## Ops: CLI, dashboard\n\n## Ops: CLI, dashboard\n',
    };
    const read = (path: string) => pages[path];
    const text = [
      '[fine](a.md#the-http-job) [fine too](a.md#ops-cli-dashboard-1) [web](https://example.com/x.md)',
      '[no file](b.md) [no heading](a.md#the-https-job) [here, no heading](#nowhere) ![no image](img/x.png)',
      '`[in code](c.md)`',
      '```',
      '[in a block](d.md)',
      '```',
    ].join('\n');

    expect(brokenLinks('docs/a.md', text, read)).toEqual([
      'docs/a.md: b.md (no file docs/b.md)',
      'docs/a.md: a.md#the-https-job (no heading #the-https-job in docs/a.md)',
      'docs/a.md: #nowhere (no heading #nowhere in docs/a.md)',
      'docs/a.md: img/x.png (no file docs/img/x.png)',
    ]);
  });
});
