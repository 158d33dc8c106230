/**
 * What the package's runtimes (the Node worker, the CLI) use of the drain
 * beyond its public entry: the long-running drain, the settings machinery,
 * the logger, the address checks. No package export leads here
 * (test/package/layers.test.ts), so none of it is part of the API.
 */
export { createRegistry } from './registry.js';
export { runUntilStopped, type RunningDrain } from './run-until-stopped.js';
export { CLAIMS_AHEAD_AT_ONCE } from './job-loop.js';
export { AUTO_BATCH_MAX_SLOTS } from './claim-policy.js';
export { errorFields, jsonConsoleLogger } from './logger.js';
export { jobSettings, SHARED_SETTINGS } from './settings.js';
export { readSettings, setting, type SettingVariables } from './setting.js';
export { number, onOff, secondsAsMilliseconds, text, wholeNumber, wholeNumberOr } from './setting-kinds.js';
export { isPublicAddress } from './handlers/public-address.js';
export { isFramingHeader } from './handlers/framing-headers.js';
