/**
 * Headers that frame or route a request rather than describe it: the client
 * sets them from the request it sends. Given by a payload, `Host` reaches
 * another virtual host behind an allowed front end, and a `Content-Length`
 * shorter than the body smuggles a second request onto the connection
 * (node:http sends what it is given; workerd sets both itself).
 */
const FRAMING_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'te',
  'trailer',
  'upgrade',
  'keep-alive',
]);

/** Whether `name` is a framing or hop-by-hop header (`Proxy-*` included), which deliveries never take from a payload. */
export function isFramingHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return FRAMING_HEADERS.has(lower) || lower.startsWith('proxy-');
}
