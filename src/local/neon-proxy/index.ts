export { startNeonProxy, type NeonProxy, type NeonProxyOptions, type NeonProxyTraffic } from './server.js';
export { delayLine, delays, networkDelayFrom, NO_NETWORK_DELAY, type NetworkDelay } from './network-delay.js';
export { createSqlOverHttpHandler, type SqlOverHttpHandler } from './sql-over-http.js';
export { createWebSocketPipe, type PostgresAddress, type WebSocketPipe } from './ws-pipe.js';
