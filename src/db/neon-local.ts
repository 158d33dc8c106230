import type { NeonConfig } from '@neondatabase/serverless';

/**
 * The `neonConfig` settings that point `@neondatabase/serverless` at the local
 * Neon proxy (src/local/neon-proxy) instead of Neon's cloud endpoints.
 *
 * This module runs inside the Workers runtime too (the Worker factory applies it when LOCAL_NEON_PROXY is set), so it imports nothing from
 * Node. Node callers must also set `neonConfig.webSocketConstructor = ws`,
 * because Node 20 has no global WebSocket.
 */
export interface LocalNeonConfig
  extends Pick<NeonConfig, 'useSecureWebSocket' | 'pipelineConnect' | 'poolQueryViaFetch'> {
  wsProxy: (host: string, port: number | string) => string;
  fetchEndpoint: () => string;
}

/** The part of the driver's `neonConfig` (its static settings) that `applyLocalNeonConfig` writes. */
export type NeonConfigSettings = Pick<NeonConfig, keyof LocalNeonConfig>;

/**
 * @param proxyAddress where the local proxy listens and its per-run secret,
 *   `127.0.0.1:4444/<secret>` (LOCAL_NEON_PROXY): the secret leads every path.
 */
export function localNeonConfig(proxyAddress: string): LocalNeonConfig {
  return {
    // Same URL shape as the driver builds for a string `wsProxy`, on the path the proxy serves.
    wsProxy: (host, port) => `${proxyAddress}/v1?address=${host}:${port}`,
    // The proxy speaks plain ws:// and http://; there is no TLS locally.
    useSecureWebSocket: false,
    // Pipelining sends the password before Postgres asks for it, which only works
    // with cleartext password auth; a local Postgres may use trust or SCRAM.
    pipelineConnect: false,
    fetchEndpoint: () => `http://${proxyAddress}/sql`,
    // Keep `Pool.query()` on the WebSocket path it is configured for.
    poolQueryViaFetch: false,
  };
}

/**
 * Applies `localNeonConfig(proxyAddress)` to the driver's `neonConfig` object
 * (whose static setters hold the driver-wide defaults).
 */
export function applyLocalNeonConfig(neonConfig: NeonConfigSettings, proxyAddress: string): void {
  Object.assign(neonConfig, localNeonConfig(proxyAddress));
}
