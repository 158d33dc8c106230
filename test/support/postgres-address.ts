import type { PostgresAddress } from '../../src/local/neon-proxy';

/** Where the server of a `postgres://` URL listens, in the form the local Neon proxy takes. */
export function postgresAddressOf(url: string): PostgresAddress {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 5432) };
}
