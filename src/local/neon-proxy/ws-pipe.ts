import { STATUS_CODES, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { delayLine, NO_NETWORK_DELAY, type NetworkDelay } from './network-delay.js';

/** A TCP address where Postgres listens. */
export interface PostgresAddress {
  host: string;
  port: number;
}

/**
 * The WebSocket-to-TCP pipe that Neon's wsproxy provides: a client opens
 * `/v1?address=HOST:PORT`, and from then on every WebSocket message carries raw
 * bytes of the Postgres wire protocol, in both directions.
 */
export interface WebSocketPipe {
  /** Takes over an HTTP upgrade request that was routed to the pipe. */
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Abruptly cuts every open pipe on both sides, as a network failure would. */
  dropConnections(): void;
  /** Messages clients have sent over every pipe so far. */
  messagesFromClients(): number;
  /** Cuts every open pipe; the pipe must not be given upgrades afterwards. */
  close(): void;
}

interface OpenPipe {
  webSocket: WebSocket;
  postgres: Socket;
}

/** Above this many bytes queued for the client, reading from Postgres pauses. */
const WEBSOCKET_HIGH_WATER_MARK = 1024 * 1024;

/**
 * @param allowedAddresses the only Postgres addresses a client may ask for,
 *   so the pipe cannot be used as an open TCP relay.
 * @param networkDelay the network to play between client and Postgres, per message.
 */
export function createWebSocketPipe(
  allowedAddresses: readonly PostgresAddress[],
  networkDelay: NetworkDelay = NO_NETWORK_DELAY,
): WebSocketPipe {
  const allowed = new Map(allowedAddresses.map((address) => [`${address.host}:${address.port}`, address]));
  const webSocketServer = new WebSocketServer({ noServer: true });
  const openPipes = new Set<OpenPipe>();
  const counted = { messagesFromClients: 0 };

  const dropConnections = (): void => {
    for (const { webSocket, postgres } of openPipes) {
      webSocket.terminate();
      postgres.destroy();
    }
    openPipes.clear();
  };

  return {
    handleUpgrade(request, socket, head) {
      const requested = new URL(request.url ?? '/', 'http://localhost').searchParams.get('address');
      const address = requested === null ? undefined : allowed.get(requested);
      if (address === undefined) {
        refuseUpgrade(socket, 403, `proxying to address ${JSON.stringify(requested)} is not allowed`);
        return;
      }
      webSocketServer.handleUpgrade(request, socket, head, (webSocket) => {
        openPipes.add(pipeToPostgres(webSocket, address, networkDelay, counted, (closed) => openPipes.delete(closed)));
      });
    },
    dropConnections,
    messagesFromClients: () => counted.messagesFromClients,
    close() {
      dropConnections();
      webSocketServer.close();
    },
  };
}

/** Answers an upgrade request with a plain HTTP error instead of a WebSocket. */
export function refuseUpgrade(socket: Duplex, status: number, reason: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Connection: close\r\n' +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(reason)}\r\n` +
      `\r\n${reason}`,
  );
}

function pipeToPostgres(
  webSocket: WebSocket,
  address: PostgresAddress,
  networkDelay: NetworkDelay,
  counted: { messagesFromClients: number },
  onClosed: (pipe: OpenPipe) => void,
): OpenPipe {
  // Bytes the client sends before the TCP connection is up are queued by the socket.
  const postgres = connect({ host: address.host, port: address.port, noDelay: true });
  const pipe = { webSocket, postgres };
  // Each direction's messages, and the close that follows them, cross the played network in order.
  const toPostgres = delayLine(networkDelay);
  const toClient = delayLine(networkDelay);

  webSocket.on('message', (data) => {
    counted.messagesFromClients += 1;
    toPostgres(() => {
      if (!postgres.write(messageBytes(data))) {
        webSocket.pause();
        postgres.once('drain', () => webSocket.resume());
      }
    });
  });
  postgres.on('data', (chunk) => {
    toClient(() => {
      webSocket.send(chunk, { binary: true }, () => {
        if (webSocket.bufferedAmount < WEBSOCKET_HIGH_WATER_MARK) postgres.resume();
      });
      if (webSocket.bufferedAmount >= WEBSOCKET_HIGH_WATER_MARK) postgres.pause();
    });
  });

  // A client closing normally may have just sent Terminate: flush it, then let
  // Postgres close the connection. An errored client has nothing worth flushing.
  webSocket.on('close', () => toPostgres(() => postgres.end()));
  webSocket.on('error', () => postgres.destroy());

  postgres.on('error', (error: NodeJS.ErrnoException) => {
    // 1011: the server hit a condition that stopped it fulfilling the request.
    webSocket.close(1011, `Postgres connection failed: ${error.code ?? error.message}`.slice(0, 123));
  });
  postgres.on('close', () => {
    onClosed(pipe);
    // Postgres ending the session is a normal close for the client, as in Neon's wsproxy.
    toClient(() => {
      if (webSocket.readyState === WebSocket.OPEN) webSocket.close(1000, 'Postgres connection closed');
    });
  });

  return pipe;
}

/** `ws` hands over a Buffer by default, but its type also allows the other binary shapes. */
function messageBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
