import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { PermanentError, type DeliveryFetch } from '../drain/index.js';
import { isFramingHeader, isPublicAddress } from '../drain/internal.js';

/** Resolves a name to its addresses, as `dns.lookup(name, { all: true })` does. */
export type ResolveName = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: ResolveName = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );

/** Statuses whose responses have no body, which a Response must be made without. */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

export interface PublicAddressFetchOptions {
  /** How names are resolved; the system's resolver (getaddrinfo, /etc/hosts too) by default. Tests give their own. */
  resolve?: ResolveName;
  /** Which addresses may be reached; public ones (`isPublicAddress`) by default. Tests let their own receiver in. */
  allowAddress?: (address: string) => boolean;
}

/**
 * The `http` job's delivery in Node, where nothing in front of the process
 * keeps it off private networks: the URL's name is resolved once, the
 * delivery is refused (for good) unless every address it has is public, and
 * the connection goes to an address that was checked. The check sits in the
 * socket's own lookup, so no second resolution can answer otherwise (DNS
 * rebinding), and no connection is reused across deliveries. IP literals do
 * not reach the lookup: `destinationProblem` checks those before.
 */
export function publicAddressFetch(options: PublicAddressFetchOptions = {}): DeliveryFetch {
  const resolve = options.resolve ?? systemResolver;
  const allowAddress = options.allowAddress ?? isPublicAddress;
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolve(hostname)
      .then((all) => {
        const refused = all.find(({ address }) => !allowAddress(address));
        if (refused !== undefined) {
          throw new PermanentError(`${hostname} resolves to ${refused.address}, which is not a public address`);
        }
        const family = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : undefined;
        const usable = all.filter((address) => family === undefined || address.family === family);
        const [first] = usable;
        if (first === undefined) throw new Error(`${hostname} has no address`);
        if (lookupOptions.all) callback(null, usable);
        else callback(null, first.address, first.family);
      })
      .catch((error: NodeJS.ErrnoException) => callback(error, '', 0));
  };

  return (url, { method, headers, body, signal }) =>
    new Promise<Response>((resolveResponse, reject) => {
      signal.throwIfAborted();
      const requestOptions: RequestOptions = {
        method,
        // node:http frames the request by these when given: only it may set them.
        headers: Object.fromEntries([...headers].filter(([name]) => !isFramingHeader(name))),
        lookup,
        // A fresh connection each time: a kept-alive one would skip the check.
        agent: false,
      };
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const outgoing = send(url, requestOptions, (incoming) => resolveResponse(toResponse(incoming)));
      const abort = () => outgoing.destroy(signal.reason as Error);
      signal.addEventListener('abort', abort, { once: true });
      outgoing.once('close', () => signal.removeEventListener('abort', abort));
      outgoing.once('error', reject);
      outgoing.end(body);
    });
}

function toResponse(incoming: IncomingMessage): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming.headers)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, one);
  }
  const status = incoming.statusCode ?? 502;
  if (NULL_BODY_STATUSES.has(status)) {
    incoming.resume();
    return new Response(null, { status, headers });
  }
  return new Response(Readable.toWeb(incoming) as ReadableStream, { status, headers });
}
