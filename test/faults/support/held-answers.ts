import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { NeonProxy } from '../../../src/local/neon-proxy';
import { LOOPBACK } from '../../../src/local/ports';

/**
 * A hop between the Worker and the local Neon proxy that can hold back the
 * answer to one chosen SQL-over-HTTP statement while something else happens:
 * a reading the database made before a concurrent change then reaches its
 * reader after that change, however narrow the window is on one machine.
 * Everything else (WebSockets included) passes straight through.
 */
export interface HeldAnswers {
  /** What the Worker's LOCAL_NEON_PROXY takes in place of the proxy's own address. */
  address: string;
  /**
   * The next statement whose text contains `marker` runs at once, but its
   * answer waits until `meanwhile` has finished. Returns what calls it off.
   */
  holdNext(marker: string, meanwhile: () => Promise<void>): () => void;
  close(): Promise<void>;
}

export async function heldAnswers(proxy: NeonProxy): Promise<HeldAnswers> {
  const [proxyHostPort, secret] = proxy.address.split('/') as [string, string];
  let armed: { marker: string; meanwhile: () => Promise<void> } | undefined;

  /** The proxy answers only to its own Host. */
  const toProxy = (headers: IncomingHttpHeaders): IncomingHttpHeaders => ({ ...headers, host: proxyHostPort });

  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const hold = armed !== undefined && body.toString('utf8').includes(armed.marker) ? armed : undefined;
    if (hold !== undefined) armed = undefined;
    const forwarded = httpRequest(
      {
        port: proxy.port,
        host: LOOPBACK,
        method: request.method,
        path: request.url,
        headers: toProxy(request.headers),
      },
      async (answer) => {
        const answerChunks: Buffer[] = [];
        for await (const chunk of answer) answerChunks.push(chunk as Buffer);
        await hold?.meanwhile();
        response.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(answerChunks));
      },
    );
    forwarded.on('error', () => response.destroy());
    forwarded.end(body);
  });
  const piped = new Set<Socket>();
  server.on('upgrade', (request, socket, head: Buffer) => {
    piped.add(socket as Socket);
    socket.on('close', () => piped.delete(socket as Socket));
    const upstream = connect(proxy.port, LOOPBACK, () => {
      const headers = Object.entries(toProxy(request.headers)).flatMap(([name, value]) =>
        (Array.isArray(value) ? value : [value]).map((one) => `${name}: ${one}`),
      );
      upstream.write(`${request.method} ${request.url} HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n`);
      upstream.write(head);
      upstream.pipe(socket).pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `${LOOPBACK}:${port}/${secret}`,
    holdNext(marker, meanwhile) {
      const hold = { marker, meanwhile };
      armed = hold;
      return () => {
        if (armed === hold) armed = undefined;
      };
    },
    async close() {
      for (const socket of piped) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
