export { startNeonProxy, type NeonProxy, type NeonProxyOptions } from './server.js';
export { createSqlOverHttpHandler, type SqlOverHttpHandler } from './sql-over-http.js';
export { createWebSocketPipe, type PostgresAddress, type WebSocketPipe } from './ws-pipe.js';
