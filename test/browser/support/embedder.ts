import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LOOPBACK } from '../../../src/local/ports';

/** A site that frames the page named by its `?src=`; reachable under two origins. */
export interface Embedder {
  /** http://localhost:<port>: the origin the tests allow to frame status pages. */
  origin: string;
  /** http://127.0.0.1:<port>: the same server under an origin nobody allowed. */
  otherOrigin: string;
  close(): Promise<void>;
}

/**
 * A real server on loopback, not a page the browser fakes: Chromium's Local
 * Network Access refuses a public page's frames of a loopback address, and a
 * faked page counts as public.
 */
export async function startEmbedder(): Promise<Embedder> {
  const server = createServer((request, response) => {
    const src = new URL(request.url ?? '/', 'http://embedder').searchParams.get('src') ?? 'about:blank';
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(
      `<!doctype html><title>Embedder</title><iframe src="${src.replaceAll('&', '&amp;').replaceAll('"', '&quot;')}" title="Framed page"></iframe>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://localhost:${port}`,
    otherOrigin: `http://${LOOPBACK}:${port}`,
    close: () => new Promise((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))),
  };
}
