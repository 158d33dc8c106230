import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { localNeonConfig } from '../../db/neon-local.js';
import { createSqlOverHttpHandler } from './sql-over-http.js';
import { createWebSocketPipe, refuseUpgrade, type PostgresAddress } from './ws-pipe.js';

export interface NeonProxyOptions {
  /** The Postgres every connection goes to. */
  postgres: PostgresAddress;
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Defaults to 127.0.0.1: the proxy has no auth of its own, so keep it off the network. */
  host?: string;
}

export interface NeonProxy {
  port: number;
  /** HTTP base URL, e.g. `http://127.0.0.1:4444`. */
  url: string;
  /** The value for `neonConfig.wsProxy`. */
  wsProxy: (host: string, port: number | string) => string;
  /** Ends every connection, pool and the server, so the process can exit. */
  close(): Promise<void>;
  /** Abruptly cuts every piped WebSocket and every SQL-over-HTTP connection (for fault injection). */
  dropConnections(): void;
}

/**
 * Serves what `@neondatabase/serverless` expects from Neon, on one port, in
 * front of a local Postgres: SQL over HTTP on `POST /sql` and the WebSocket
 * pipe (Neon's wsproxy protocol) on `/v1`.
 */
export async function startNeonProxy({ postgres, port = 0, host = '127.0.0.1' }: NeonProxyOptions): Promise<NeonProxy> {
  const sqlOverHttp = createSqlOverHttpHandler(postgres);
  const webSocketPipe = createWebSocketPipe([postgres]);

  const server = createServer((request, response) => {
    if (pathOf(request.url) !== '/sql') {
      response.writeHead(404).end();
    } else if (request.method !== 'POST') {
      response.writeHead(405, { Allow: 'POST' }).end();
    } else {
      void sqlOverHttp.handle(request, response);
    }
  });
  server.on('upgrade', (request, socket, head: Buffer) => {
    if (pathOf(request.url) === '/v1') {
      webSocketPipe.handleUpgrade(request, socket, head);
    } else {
      refuseUpgrade(socket, 404, 'WebSockets are served on /v1');
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const boundPort = (server.address() as AddressInfo).port;
  const hostPort = `${host.includes(':') ? `[${host}]` : host}:${boundPort}`;

  return {
    port: boundPort,
    url: `http://${hostPort}`,
    wsProxy: localNeonConfig(hostPort).wsProxy,
    dropConnections() {
      webSocketPipe.dropConnections();
      sqlOverHttp.dropConnections();
    },
    async close() {
      const serverClosed = new Promise<void>((resolve, reject) =>
        server.close((error) => (error === undefined ? resolve() : reject(error))),
      );
      // Keep-alive HTTP connections would otherwise hold server.close() open.
      server.closeAllConnections();
      webSocketPipe.close();
      await sqlOverHttp.close();
      await serverClosed;
    },
  };
}

function pathOf(url: string | undefined): string {
  return new URL(url ?? '/', 'http://localhost').pathname;
}
