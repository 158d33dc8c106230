import ipaddr from 'ipaddr.js';

/** Global unicast IPv6 (RFC 4291): everything outside it is not on the public internet. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Whether an IP address is on the public internet, so an `http` job may
 * reach it: ipaddr.js's range must be plain `unicast`, which leaves out
 * loopback, private, link-local, carrier-grade NAT, multicast, broadcast,
 * unique-local, the documentation and benchmarking ranges, NAT64 (64:ff9b::/96),
 * 6to4 (2002::/16), Teredo, site-local (fec0::/10) and the other reserved
 * ones; an IPv6 address must also be global unicast (2000::/3), which leaves
 * out IPv4-compatible forms such as `::7f00:1`. IPv4-mapped addresses
 * (`::ffff:a.b.c.d`, `::ffff:0:a.b.c.d`) are refused outright rather than
 * unwrapped: a public service has no reason to be named that way.
 * Text that is not an address is not public.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || parsed.match(GLOBAL_UNICAST_V6);
}

/** Whether `host` (a URL's hostname, IPv6 without brackets) is an IP address rather than a name. */
export function isIpLiteral(host: string): boolean {
  return ipaddr.isValid(host);
}
