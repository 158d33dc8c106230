import type { Queryable } from '../db/types.js';
import { defineJobTypeRetentions } from '../engine/retention.js';
import type { JobRegistry } from './registry.js';

/**
 * Writes the retention of each type the registry runs (its definition's
 * `retentionSeconds`, or none) where every drain's pruning reads it: the
 * definition is the source of a type's retention, so a retention taken out
 * of a definition is cleared at the next drain too.
 */
export async function syncJobTypeRetentions(
  db: Queryable,
  registry: Pick<JobRegistry, 'types' | 'definitionOf'>,
): Promise<void> {
  await defineJobTypeRetentions(
    db,
    registry.types.map((type) => ({ type, retentionSeconds: registry.definitionOf(type)?.options.retentionSeconds })),
  );
}
