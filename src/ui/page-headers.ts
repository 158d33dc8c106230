import type { Context, MiddlewareHandler } from 'hono';
import { NONCE, secureHeaders } from 'hono/secure-headers';
import type { AppDeps } from '../http/context.js';
import type { UiEnv } from './ui-env.js';

interface Framing {
  /** The CSP frame-ancestors sources: who may put the page in a frame. */
  frameAncestors: (c: Context) => string;
  xFrameOptions: string | false;
  crossOriginResourcePolicy: string;
}

/**
 * Headers of every page: a CSP that allows only this page's own inline
 * script and style (by nonce) and requests to this origin, nothing external;
 * no referrer (a status page's URL carries its token); never cached.
 * HSTS is left to the zone: includeSubDomains from a Worker could surprise
 * the other hosts of its domain.
 */
function pageHeaders({ frameAncestors, ...framingHeaders }: Framing): MiddlewareHandler<UiEnv> {
  const headers = secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      scriptSrc: [NONCE],
      styleSrc: [NONCE],
      connectSrc: ["'self'"],
      // The favicon is a data: URL.
      imgSrc: ['data:'],
      baseUri: ["'none'"],
      formAction: ["'none'"],
      frameAncestors: [frameAncestors],
    },
    strictTransportSecurity: false,
    referrerPolicy: 'no-referrer',
    ...framingHeaders,
  });
  return async (c, next) => {
    await headers(c, next);
    c.header('cache-control', 'no-store');
  };
}

/** The dashboard acts with an admin's key: no site may frame it (clickjacking). */
export const dashboardHeaders = pageHeaders({
  frameAncestors: () => "'none'",
  xFrameOptions: 'DENY',
  crossOriginResourcePolicy: 'same-origin',
});

/**
 * A status page may be framed by this origin and by the configured CORS
 * origins: the products that link to it are the ones trusted to read its
 * job from their pages, so the same list decides who may embed it. No
 * X-Frame-Options, which cannot name origins (frame-ancestors supersedes it),
 * and CORP cross-origin, so an embedder that requires CORP (COEP) can frame it.
 */
export function statusPageHeaders(deps: AppDeps) {
  return pageHeaders({
    frameAncestors: (c) => ["'self'", ...deps.settings(c.env).corsOrigins.filter(isOrigin)].join(' '),
    xFrameOptions: false,
    crossOriginResourcePolicy: 'cross-origin',
  });
}

/** Only plain origins reach the CSP header, whatever else the configured list holds. */
function isOrigin(text: string): boolean {
  try {
    return new URL(text).origin === text;
  } catch {
    return false;
  }
}

/** The nonce that this response's CSP allows; the page's inline style and script carry it. */
export function cspNonce(c: Context<UiEnv>): string {
  const nonce = c.get('secureHeadersNonce');
  if (nonce === undefined) throw new Error('a page was rendered without its page headers');
  return nonce;
}
