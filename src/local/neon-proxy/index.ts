export { startNeonProxy, type NeonProxy, type NeonProxyOptions } from './server';
export { createSqlOverHttpHandler, type SqlOverHttpHandler } from './sql-over-http';
export { createWebSocketPipe, type PostgresAddress, type WebSocketPipe } from './ws-pipe';
