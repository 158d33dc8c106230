/**
 * Where an `http` job may deliver: hosts on the admin allow-list
 * (HTTP_ALLOWED_HOSTS: exact names, or `*.example.com` for any subdomain),
 * over http or https. Loopback, private and link-local IP literals and
 * `localhost` are refused whatever a wildcard says; only an exact allow-list
 * entry naming one lets it through (a test server on 127.0.0.1). Names that
 * resolve to private addresses are the platform's to refuse: Workers' fetch
 * cannot reach them.
 */
export function destinationProblem(url: URL, allowedHosts: readonly string[]): string | undefined {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `only http and https URLs are delivered, not ${url.protocol}`;
  // Brackets off IPv6 literals; a trailing dot (`localhost.`) names the same host.
  const host = url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  const entries = allowedHosts.map((entry) => entry.toLowerCase());
  const exact = entries.includes(host);
  if (!exact && isInternalHost(host)) {
    return `host ${host} is a loopback, private or link-local address; only an exact HTTP_ALLOWED_HOSTS entry allows it`;
  }
  if (!exact && !entries.some((entry) => entry.startsWith('*.') && host.endsWith(entry.slice(1)))) {
    return entries.length === 0
      ? `host ${host} is not allowed: HTTP_ALLOWED_HOSTS is empty`
      : `host ${host} is not on HTTP_ALLOWED_HOSTS`;
  }
  return undefined;
}

/** Reads `a.example.com, *.hooks.example.com` into entries. */
export function parseAllowedHosts(list: string | undefined): string[] {
  return (list ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

function isInternalHost(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const v4 = ipv4Octets(host);
  if (v4 !== undefined) return isInternalIpv4(v4);
  return host.includes(':') && isInternalIpv6(host);
}

/** The URL parser has already turned every IPv4 spelling (hex, octal, one number) into dotted decimal. */
function ipv4Octets(host: string): number[] | undefined {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  return match === null ? undefined : match.slice(1).map(Number);
}

function isInternalIpv4([a = 0, b = 0]: number[]): boolean {
  return (
    a === 0 || // "this network"
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) || // carrier-grade NAT
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    a >= 224 // multicast and reserved
  );
}

function isInternalIpv6(host: string): boolean {
  if (host === '::' || host === '::1') return true;
  // IPv4-mapped (::ffff:a.b.c.d, which the URL parser writes as ::ffff:xxxx:xxxx).
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped !== null) {
    const high = parseInt(mapped[1]!, 16);
    const low = parseInt(mapped[2]!, 16);
    return isInternalIpv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  }
  const first = parseInt(host.split(':')[0] || '0', 16);
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80; // unique local fc00::/7, link-local fe80::/10
}
