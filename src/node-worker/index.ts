/**
 * `skiplock/node-worker`: the drain as a long-running Node process, over the
 * `pg` driver. A subpath of its own because it pulls in `pg` and `node:os`,
 * which a Worker bundle must never see.
 */
export { startWorker, type RunningWorker, type WorkerOptions } from './start-worker.js';
export { readWorkerConfig, type WorkerConfig, type WorkerVariables } from './config.js';
export { publicAddressFetch, type PublicAddressFetchOptions, type ResolveName } from './public-address-fetch.js';
