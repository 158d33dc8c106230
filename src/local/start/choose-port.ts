import { isPortFree } from '../ports.js';
import type { PortSetting } from './start-config.js';

/** The port the setting asks for, which must be free, or else `pick()`'s choice. */
export async function choosePort(setting: PortSetting, pick: () => Promise<number>): Promise<number> {
  if (setting.requested === undefined) return pick();
  await checkPortFree(setting);
  return setting.requested;
}

/** Refuses, in one line, a port the setting asks for that something else holds. */
export async function checkPortFree({ variable, requested }: PortSetting): Promise<void> {
  if (requested === undefined || (await isPortFree(requested))) return;
  throw new Error(
    `port ${requested} (${variable}) is in use: choose a free port, or leave ${variable} out to have one picked`,
  );
}
