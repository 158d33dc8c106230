import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  /** Default `answer <status>`. */
  body?: string;
}

/**
 * An HTTP receiver on 127.0.0.1 that keeps every request it gets and
 * answers as `answer` says (given the request and the requests before it),
 * when its promise settles if it gives one.
 */
export async function startReceiver(
  answer: (request: Received, earlier: readonly Received[]) => Answer | Promise<Answer>,
) {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const got = {
        method: request.method ?? '',
        path: request.url ?? '/',
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
      };
      const answered = answer(got, [...received]);
      received.push(got);
      void Promise.resolve(answered).then(({ status, headers = {}, body = `answer ${status}` }) => {
        if (!response.destroyed) response.writeHead(status, headers).end(body);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    received,
    /** What arrived at this path (with its query), oldest first. */
    at: (path: string) => received.filter((request) => request.path === path),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
