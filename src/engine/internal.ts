/**
 * What the package's runtimes (the Node worker) use of the engine beyond its
 * public entry. No package export leads here (test/package/layers.test.ts),
 * so none of it is part of the API.
 */
export { drainWorkerId } from './worker-id.js';
