/** A Postgres connection string, checked, with the parts that messages name. */
export interface DatabaseTarget {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
  /** Where the URL came from (`DATABASE_URL`, `--database-url`), so messages say what to fix. */
  readonly source: string;
}

const EXAMPLE = 'postgres://user:password@host:5432/database';

/**
 * Checks a connection string before any driver sees it: pg reads a malformed
 * one as a pile of defaults and then fails somewhere that hides the typo.
 */
export function parseDatabaseUrl(value: string, source: string): DatabaseTarget {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new Error(`${source} is not a URL: expected ${EXAMPLE}`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new Error(`${source} must start with postgres:// (it starts with ${parsed.protocol}//): expected ${EXAMPLE}`);
  }
  const database = decodeURIComponent(parsed.pathname.slice(1));
  const user = decodeURIComponent(parsed.username);
  const missing = [!parsed.hostname && 'host', !user && 'user', !database && 'database name'].filter(Boolean);
  if (missing.length > 0) throw new Error(`${source} has no ${missing.join(' or ')}: expected ${EXAMPLE}`);
  // An IPv6 host is bracketed in a URL but not when connecting.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  return { url: value, host, port: Number(parsed.port || 5432), database, user, source };
}

/** The URL with its password masked, for printing. */
export function withoutPassword(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}
