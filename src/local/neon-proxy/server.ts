import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { localNeonConfig } from '../../db/neon-local.js';
import { randomSecret } from '../random-secret.js';
import { localClientsOnly, type Admission } from './local-clients-only.js';
import { delays, NO_NETWORK_DELAY, oneWayMs, type NetworkDelay } from './network-delay.js';
import { createSqlOverHttpHandler } from './sql-over-http.js';
import { createWebSocketPipe, refuseUpgrade, type PostgresAddress } from './ws-pipe.js';

export interface NeonProxyOptions {
  /** The Postgres every connection goes to. */
  postgres: PostgresAddress;
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Defaults to 127.0.0.1: the proxy is for this machine's own clients, so keep it off the network. */
  host?: string;
  /** The network to play between the clients and Postgres; none by default. */
  networkDelay?: NetworkDelay;
}

export interface NeonProxy {
  port: number;
  /**
   * `host:port/<secret>`: what the Worker's LOCAL_NEON_PROXY and
   * `applyLocalNeonConfig` take. The secret is new on every start, and
   * every request must carry it.
   */
  address: string;
  /** HTTP base URL with the secret, e.g. `http://127.0.0.1:4444/<secret>`; SQL over HTTP is `${url}/sql`. */
  url: string;
  /** The value for `neonConfig.wsProxy`. */
  wsProxy: (host: string, port: number | string) => string;
  /** Ends every connection, pool and the server, so the process can exit. */
  close(): Promise<void>;
  /** Abruptly cuts every piped WebSocket and every SQL-over-HTTP connection (for fault injection). */
  dropConnections(): void;
  /** What the clients have sent towards Postgres so far, for counting trips to the database. */
  traffic(): NeonProxyTraffic;
}

export interface NeonProxyTraffic {
  /** SQL-over-HTTP requests: one round trip each. */
  httpRequests: number;
  /** WebSocket messages from clients: a round trip each at most (a client may send several before an answer). */
  webSocketMessages: number;
}

/**
 * Serves what `@neondatabase/serverless` expects from Neon, on one port, in
 * front of a local Postgres: SQL over HTTP on `POST /<secret>/sql` and the
 * WebSocket pipe (Neon's wsproxy protocol) on `/<secret>/v1`, to the local
 * stack's own clients only (see local-clients-only.ts).
 */
export async function startNeonProxy({
  postgres,
  port = 0,
  host = '127.0.0.1',
  networkDelay = NO_NETWORK_DELAY,
}: NeonProxyOptions): Promise<NeonProxy> {
  const sqlOverHttp = createSqlOverHttpHandler(postgres);
  const webSocketPipe = createWebSocketPipe([postgres], networkDelay);
  const secret = randomSecret();
  let httpRequests = 0;
  // Set once the port is bound, which the Host check needs.
  let admit = (_request: IncomingMessage): Admission => ({ admitted: false, status: 503, reason: 'starting' });

  const server = createServer((request, response) => {
    const admission = admit(request);
    if (!admission.admitted) {
      response.writeHead(admission.status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(admission.reason);
    } else if (admission.path !== '/sql') {
      response.writeHead(404).end();
    } else if (request.method !== 'POST') {
      response.writeHead(405, { Allow: 'POST' }).end();
    } else {
      httpRequests += 1;
      // One request is one transaction: where in its round trip the wait falls changes nothing a client sees.
      if (delays(networkDelay)) {
        setTimeout(() => void sqlOverHttp.handle(request, response), oneWayMs(networkDelay) + oneWayMs(networkDelay));
      } else {
        void sqlOverHttp.handle(request, response);
      }
    }
  });
  server.on('upgrade', (request, socket, head: Buffer) => {
    const admission = admit(request);
    if (!admission.admitted) {
      refuseUpgrade(socket, admission.status, admission.reason);
    } else if (admission.path === '/v1') {
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
  admit = localClientsOnly({ hostPort, secret });
  const address = `${hostPort}/${secret}`;

  return {
    port: boundPort,
    address,
    url: `http://${address}`,
    wsProxy: localNeonConfig(address).wsProxy,
    traffic: () => ({ httpRequests, webSocketMessages: webSocketPipe.messagesFromClients() }),
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
