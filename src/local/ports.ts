import { createServer, type AddressInfo } from 'node:net';

/** Where every local service listens: loopback only, nothing here has auth worth exposing. */
export const LOOPBACK = '127.0.0.1';

/** Binds the port for a moment: if that works, nothing else holds it. */
export function isPortFree(port: number, host: string = LOOPBACK): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, host, () => probe.close(() => resolve(true)));
  });
}

/** The first free port from `from` upward, so the usual port is kept while it is free. */
export async function firstFreePort(from: number, host: string = LOOPBACK): Promise<number> {
  for (let port = from; port <= 65_535; port += 1) {
    if (await isPortFree(port, host)) return port;
  }
  throw new Error(`no free port on ${host} from ${from} upward`);
}

/** A port the operating system has just handed out, for services whose port nobody types. */
export function anyFreePort(host: string = LOOPBACK): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
