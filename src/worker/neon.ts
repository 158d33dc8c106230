import { neonConfig } from '@neondatabase/serverless';
import { applyLocalNeonConfig } from '../db/neon-local.js';
import type { DatabaseSource } from './settings.js';

export { neonHttpDb } from '../db/neon-http.js';
export { neonPoolDb } from '../db/neon-ws.js';

/** Points the driver at the local Neon proxy when the settings name one. */
export function configureNeon(source: DatabaseSource & { kind: 'neon' }): void {
  if (source.localProxy !== undefined) applyLocalNeonConfig(neonConfig, source.localProxy);
}
