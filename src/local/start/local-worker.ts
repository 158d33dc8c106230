import { waitForHealthy } from '../health.js';
import { firstFreePort, isPortFree, LOOPBACK } from '../ports.js';
import type { ProcessExit } from '../processes.js';
import { startWranglerDev, type WranglerDev, type WranglerDevOptions } from '../wrangler-dev.js';
import { choosePort } from './choose-port.js';
import type { PortSetting } from './start-config.js';

/** The reference Worker as `npm start` runs it: its `wrangler dev` and the URL it answers on. */
export interface LocalWorker {
  wrangler: WranglerDev;
  url: string;
}

const DEFAULT_PORT = 8787;
const HEALTHY_WITHIN_MS = 60_000;
const PORT_ATTEMPTS = 3;

/**
 * Runs the Worker under `wrangler dev` until `GET /healthz` answers 200. A
 * port picked here can be taken by another `npm start` in the seconds before
 * wrangler binds it; then the next free one is tried. When wrangler fails for
 * good, what it said is shown before the error.
 */
export async function startLocalWorker(
  portSetting: PortSetting,
  options: Omit<WranglerDevOptions, 'port'>,
  stopRequested: AbortSignal,
): Promise<LocalWorker> {
  let firstCandidate = DEFAULT_PORT;
  for (let attempt = 1; ; attempt += 1) {
    const port = await choosePort(portSetting, () => firstFreePort(firstCandidate));
    const wrangler = await startWranglerDev({ ...options, port });
    const url = `http://${LOOPBACK}:${port}`;
    try {
      await waitForWorker(wrangler, url, stopRequested);
      return { wrangler, url };
    } catch (error) {
      await wrangler.stop();
      if (stopRequested.aborted) throw error;
      const lostPortRace = portSetting.requested === undefined && !(await isPortFree(port));
      if (!lostPortRace || attempt === PORT_ATTEMPTS) {
        process.stderr.write(await wrangler.output());
        throw error;
      }
      firstCandidate = port + 1;
    }
  }
}

async function waitForWorker(wrangler: WranglerDev, url: string, stopRequested: AbortSignal): Promise<void> {
  const exitedEarly = wrangler.exited.then((exit) =>
    Promise.reject(new Error(`wrangler dev ${describeExit(exit)} before the Worker answered`)),
  );
  await Promise.race([
    waitForHealthy(`${url}/healthz`, { timeoutMs: HEALTHY_WITHIN_MS, signal: stopRequested }),
    exitedEarly,
  ]);
}

export function describeExit({ code, signal }: ProcessExit): string {
  return signal === null ? `exited with code ${code}` : `was killed by ${signal}`;
}
