import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Where a request may go once it is let in, or why it is not. */
export type Admission = { admitted: true; path: string } | { admitted: false; status: number; reason: string };

export interface LocalClientsOnlyOptions {
  /** The proxy's own `host:port`: the only Host header it answers. */
  hostPort: string;
  /** The per-run secret every path starts with (`/<secret>/sql`, `/<secret>/v1`). */
  secret: string;
}

/**
 * The proxy logs anyone in as whoever its connection strings name, so it is
 * for the local stack's own clients only (the Worker under wrangler dev, the
 * tests, the tools), never for a web page the developer happens to have
 * open. WebSockets skip CORS and any page can scan loopback ports, so:
 * - a request or upgrade with an `Origin` header comes from a browser: refused;
 * - a `Host` other than the proxy's own address is DNS rebinding (a page on
 *   `evil.example` whose name now points at 127.0.0.1): refused;
 * - every path starts with a random per-run secret that only the clients
 *   given the proxy's address (the Worker's LOCAL_NEON_PROXY) know: anything
 *   else is 404, whatever follows.
 */
export function localClientsOnly({ hostPort, secret }: LocalClientsOnlyOptions) {
  const secretDigest = digest(secret);
  return (request: IncomingMessage): Admission => {
    if (request.headers.origin !== undefined) {
      return {
        admitted: false,
        status: 403,
        reason: 'this local proxy refuses requests from web pages (they send Origin)',
      };
    }
    if (request.headers.host !== hostPort) {
      return { admitted: false, status: 403, reason: `this local proxy answers only to Host ${hostPort}` };
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    const [, first = '', ...rest] = path.split('/');
    // Digests of equal length, so the comparison takes the same time whatever was sent.
    if (!timingSafeEqual(digest(first), secretDigest)) {
      return { admitted: false, status: 404, reason: 'not found' };
    }
    return { admitted: true, path: `/${rest.join('/')}` };
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
