import { basename } from 'node:path';
import type { SkiplockBindings } from '../../worker/env.js';
import type { WranglerConfig } from '../wrangler-config.js';

/** The Durable Objects a skiplock Worker binds: the queue clock and the helper drains. */
const DURABLE_OBJECTS = ['SKIPLOCK_CLOCK', 'SKIPLOCK_DRAINER'] as const satisfies ReadonlyArray<keyof SkiplockBindings>;

/**
 * Refuses, in one line, a wrangler config that does not bind skiplock's
 * Durable Objects: most often the folder of another Worker, or a config
 * that missed a step of the quick start.
 */
export function checkSkiplockBindings(config: WranglerConfig): void {
  const missing = DURABLE_OBJECTS.filter((name) => !config.durableObjects.includes(name));
  if (missing.length === 0) return;
  throw new Error(
    `${basename(config.file)} binds no ${missing.join(' or ')} Durable Object: bind SkiplockClock as SKIPLOCK_CLOCK ` +
      "and your skiplock.Drainer class as SKIPLOCK_DRAINER, as the README's Workers quick start does",
  );
}
