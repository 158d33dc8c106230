/**
 * The skiplock schema as the migrations leave it, read back from the
 * catalog in a stable order: docs/schema.sql is this dump, and
 * test/migrate.test.ts fails when the applied migrations and it differ, so
 * a schema change shows in review as a diff of one readable file.
 *
 *   npm run schema:dump    (rewrites docs/schema.sql from a fresh database)
 *
 * Function bodies are printed as they were written (prosrc), which is the
 * same on every Postgres version; so are the other definitions, once
 * trailing spaces are dropped.
 */
import { writeFile } from 'node:fs/promises';
import type { Queryable } from '../src/db/types';

export const SCHEMA_DUMP_FILE = new URL('../docs/schema.sql', import.meta.url);

/** One query per kind of object, each yielding `definition` rows in a fixed order. */
const SECTIONS: ReadonlyArray<[title: string, sql: string]> = [
  [
    'Tables',
    /* sql */ `
SELECT format(E'TABLE %s%s (\\n%s\\n)%s', c.relname,
              CASE WHEN c.relkind = 'p' THEN ' PARTITIONED BY ' || pg_get_partkeydef(c.oid) ELSE '' END,
              string_agg(format('  %s %s%s%s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
                                CASE WHEN a.attidentity <> '' THEN ' IDENTITY' ELSE '' END,
                                coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')),
                         E',\\n' ORDER BY a.attnum),
              coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', '')) AS definition
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE n.nspname = 'skiplock' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
GROUP BY c.oid, c.relname, c.relkind, c.reloptions
ORDER BY c.relname`,
  ],
  [
    'Constraints',
    /* sql */ `
SELECT format('%s %s: %s', c.relname, k.conname, pg_get_constraintdef(k.oid)) AS definition
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
-- Not the NOT NULLs (Postgres 18 lists them here; the tables show them) nor constraint triggers (see Triggers).
WHERE n.nspname = 'skiplock' AND NOT c.relispartition AND k.contype NOT IN ('n', 't') AND k.conparentid = 0
ORDER BY c.relname, k.conname`,
  ],
  [
    'Indexes',
    /* sql */ `
SELECT pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'skiplock' AND NOT c.relispartition
ORDER BY c.relname, pg_get_indexdef(i.indexrelid)`,
  ],
  [
    'Views',
    /* sql */ `
SELECT format(E'VIEW %s AS\\n%s', c.relname, pg_get_viewdef(c.oid, true)) AS definition
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'skiplock' AND c.relkind = 'v'
ORDER BY c.relname`,
  ],
  [
    'Domains',
    /* sql */ `
SELECT format('DOMAIN %s AS %s%s', t.typname, format_type(t.typbasetype, t.typtypmod),
              coalesce(' ' || string_agg(format('CONSTRAINT %s %s', k.conname, pg_get_constraintdef(k.oid)), ' '
                                         ORDER BY k.conname), '')) AS definition
FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_constraint k ON k.contypid = t.oid
WHERE n.nspname = 'skiplock' AND t.typtype = 'd'
GROUP BY t.oid, t.typname, t.typbasetype, t.typtypmod
ORDER BY t.typname`,
  ],
  [
    'Types',
    /* sql */ `
SELECT format(E'TYPE %s AS (\\n%s\\n)', t.typname,
              string_agg(format('  %s %s', a.attname, format_type(a.atttypid, a.atttypmod)), E',\\n' ORDER BY a.attnum))
       AS definition
FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
WHERE n.nspname = 'skiplock'
GROUP BY t.typname
ORDER BY t.typname`,
  ],
  [
    'Functions',
    /* sql */ `
SELECT format(E'FUNCTION %s(%s) RETURNS %s LANGUAGE %s %s%s AS $$%s$$', p.proname,
              pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), l.lanname,
              CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END,
              coalesce(' SET ' || array_to_string(p.proconfig, ' SET '), ''), p.prosrc) AS definition
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language l ON l.oid = p.prolang
WHERE n.nspname = 'skiplock'
ORDER BY p.proname, pg_get_function_arguments(p.oid)`,
  ],
  [
    'Triggers',
    /* sql */ `
SELECT pg_get_triggerdef(t.oid) AS definition
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'skiplock' AND NOT t.tgisinternal AND NOT c.relispartition
ORDER BY c.relname, t.tgname`,
  ],
];

/** The schema of the database `db` reaches, as docs/schema.sql holds it. */
export async function dumpSchema(db: Queryable): Promise<string> {
  const parts = [
    '-- The skiplock schema the migrations make, as read back from the catalog.',
    '-- Generated by `npm run schema:dump`; test/migrate.test.ts checks it.',
  ];
  for (const [title, sql] of SECTIONS) {
    const rows = await db.query<{ definition: string }>({ text: sql, params: [] });
    const definitions = rows.map((row) => `${row.definition.replace(/[ \t]+$/gm, '')};`);
    const multiLine = definitions.some((definition) => definition.includes('\n'));
    parts.push('', `-- ${title}`, '', definitions.join(multiLine ? '\n\n' : '\n'));
  }
  return `${parts.join('\n').trimEnd()}\n`;
}

async function main(): Promise<void> {
  const { pgDb } = await import('../src/db/pg');
  const { loadMigrations } = await import('../src/migrate/load');
  const { migrate } = await import('../src/migrate/runner');
  const { startEmbeddedPostgres } = await import('../src/local/embedded-postgres');
  const { anyFreePort } = await import('../src/local/ports');
  const { randomSecret } = await import('../src/local/random-secret');
  const { mkdtemp, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dataDir = await mkdtemp(join(tmpdir(), 'skiplock-schema-'));
  const server = await startEmbeddedPostgres({
    dataDir,
    port: await anyFreePort(),
    persistent: false,
    password: randomSecret(),
  });
  const db = pgDb(server.url, { max: 1 });
  try {
    await migrate(db, await loadMigrations());
    await writeFile(SCHEMA_DUMP_FILE, await dumpSchema(db));
    console.log(`wrote ${SCHEMA_DUMP_FILE.pathname}`);
  } finally {
    await db.close();
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
