import { isPortFree } from '../ports.js';
import type { PortSetting } from './start-config.js';

/** The port the setting asks for, which must be free, or else `pick()`'s choice. */
export async function choosePort({ variable, requested }: PortSetting, pick: () => Promise<number>): Promise<number> {
  if (requested === undefined) return pick();
  if (!(await isPortFree(requested))) {
    throw new Error(
      `port ${requested} (${variable}) is in use: set ${variable} to a free port, or unset it to have one picked`,
    );
  }
  return requested;
}
