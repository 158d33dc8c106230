/**
 * The library: the queue engine and the database interface with its
 * runtime-neutral drivers. node-postgres lives at `skiplock/pg` so that a
 * Worker without Hyperdrive never bundles it.
 */
export * from './engine/index.js';
export * from './db/index.js';
