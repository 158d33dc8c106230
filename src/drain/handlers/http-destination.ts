import { isIpLiteral, isPublicAddress } from './public-address.js';

/**
 * One HTTP_ALLOWED_HOSTS entry: `[tenant=]host[:port]`, where host is a name,
 * `*.example.com` (any subdomain) or an IP address (`[::1]` with a port).
 */
export interface AllowedHost {
  /** Only this tenant's jobs may use the entry; every tenant's when undefined. */
  tenant: string | undefined;
  /** Lowercase, no trailing dot, IPv6 without brackets. */
  host: string;
  /** The one port the entry allows; 443 and 80 when undefined. */
  port: number | undefined;
}

/** The ports an entry that names none allows. */
const DEFAULT_PORTS = [443, 80];

/** The entries, read; one that cannot be read is refused by name. */
export function parseAllowedHosts(entries: readonly string[]): AllowedHost[] {
  return entries
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const host = readAllowedHost(entry);
      if (host === undefined)
        throw new Error(
          `HTTP_ALLOWED_HOSTS: cannot read "${entry}": entries are [tenant=]host[:port], comma-separated`,
        );
      return host;
    });
}

/** One entry (`acme=hooks.acme.com:8443`), or undefined when it cannot be read. */
export function readAllowedHost(entry: string): AllowedHost | undefined {
  const equals = entry.lastIndexOf('=');
  const tenant = equals < 0 ? undefined : entry.slice(0, equals).trim();
  const hostPort = entry.slice(equals + 1).trim();
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+)(?::(\d{1,5}))?$/.exec(
    // A bare IPv6 address has colons of its own and takes no port.
    isIpLiteral(hostPort) ? `[${hostPort}]` : hostPort,
  );
  const port = match?.[2] === undefined ? undefined : Number(match[2]);
  if (tenant === '' || match === null || (port !== undefined && (port < 1 || port > 65_535))) return undefined;
  return { tenant, host: normalHost(match[1]!), port };
}

/** A host as entries and URLs are compared: lowercase, IPv6 brackets off, a trailing dot (`localhost.`) off. */
function normalHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
}

/**
 * Why an `http` job of `tenant` may not deliver to `url`, or undefined when
 * it may: http or https only; a host on the allow-list for that tenant
 * (an entry without a tenant is for all; with `tenant` undefined, as for a
 * queue's webhook that carries every tenant's jobs, only those count), on 443 or 80 unless the entry
 * names the port. An IP address must be public unless an entry names that
 * very address (a receiver on 127.0.0.1 in a test), and `localhost` is never
 * delivered to. A name is checked for private addresses where it is
 * resolved: by the platform on Workers (fetch from Cloudflare's edge cannot
 * reach them), by the fetch the Node worker gives the job in Node.
 */
export function destinationProblem(
  url: URL,
  tenant: string | undefined,
  allowedHosts: readonly AllowedHost[],
): string | undefined {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `only http and https URLs are delivered, not ${url.protocol}`;
  const host = normalHost(url.hostname);
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const forTenant = allowedHosts.filter((entry) => entry.tenant === undefined || entry.tenant === tenant);
  const hostEntries = forTenant.filter(
    (entry) => entry.host === host || (entry.host.startsWith('*.') && host.endsWith(entry.host.slice(1))),
  );
  const exact = hostEntries.some((entry) => entry.host === host);
  if (host === 'localhost' || host.endsWith('.localhost')) return `host ${host} is this machine: never delivered to`;
  if (isIpLiteral(host) && !isPublicAddress(host) && !exact) {
    return `host ${host} is not a public address (loopback, private, link-local or reserved); only an HTTP_ALLOWED_HOSTS entry naming it allows it`;
  }
  if (hostEntries.length === 0) {
    if (allowedHosts.length === 0) return `host ${host} is not allowed: HTTP_ALLOWED_HOSTS is empty`;
    return `host ${host} is not on HTTP_ALLOWED_HOSTS for ${tenant === undefined ? 'every tenant' : `tenant ${tenant}`}`;
  }
  if (!hostEntries.some((entry) => (entry.port === undefined ? DEFAULT_PORTS.includes(port) : entry.port === port))) {
    return `port ${port} of ${host} is not allowed: only 443 and 80, unless the HTTP_ALLOWED_HOSTS entry names the port (${host}:${port})`;
  }
  return undefined;
}
