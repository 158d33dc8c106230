/**
 * CPU time spent by the Postgres server and by this process, read from
 * /proc. Throughput on a shared machine drifts with the load of everything
 * else running on it; the CPU time a job costs drifts far less, so it is
 * what shows whether a change made a system cheaper.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';

/** Linux reports process times in clock ticks of 1/100 s (USER_HZ) on every platform Node supports. */
const TICK_MS = 10;

export interface CpuReading {
  /** The server's processes: backends alive now plus those the postmaster has reaped. */
  postgresMs: number;
  /** This process (the harness and, for in-process workers, the system under test). */
  processMs: number;
}

export interface CpuMeter {
  read(): Promise<CpuReading>;
}

/**
 * A meter for the server at `adminUrl` when it runs on this machine and its
 * data folder is readable (the embedded server, or a local one as root);
 * undefined otherwise.
 */
export async function cpuMeter(adminUrl: string): Promise<CpuMeter | undefined> {
  const postmaster = await postmasterPid(adminUrl).catch(() => undefined);
  if (postmaster === undefined) return undefined;
  return {
    async read() {
      const usage = process.cpuUsage();
      return { postgresMs: await serverCpuMs(postmaster), processMs: (usage.user + usage.system) / 1000 };
    },
  };
}

async function postmasterPid(adminUrl: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ dir: string }>('SELECT current_setting($1) AS dir', ['data_directory']);
    const lockFile = await readFile(join(rows[0]!.dir, 'postmaster.pid'), 'utf8');
    const pid = Number(lockFile.split('\n', 1)[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } finally {
    await client.end();
  }
}

/** utime + stime of the postmaster's children, plus its own and its reaped children's. */
async function serverCpuMs(postmaster: number): Promise<number> {
  let ticks = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readStat(Number(entry));
    if (stat === undefined) continue;
    if (stat.pid === postmaster) ticks += stat.utime + stat.stime + stat.cutime + stat.cstime;
    else if (stat.ppid === postmaster) ticks += stat.utime + stat.stime;
  }
  return ticks * TICK_MS;
}

/** CPU time of this process's children whose command is `command` (workerd under Miniflare), in ms. */
export async function childrenCpuMs(command: string): Promise<number> {
  let ticks = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readStat(Number(entry));
    if (stat?.ppid === process.pid && stat.command === command) ticks += stat.utime + stat.stime;
  }
  return ticks * TICK_MS;
}

/** CPU spent around some work, in ms: by workerd, by this process (clients and Neon proxy), by Postgres when it can be read. */
export interface CpuSpent {
  workerd: number;
  node: number;
  postgres: number | undefined;
}

/** Runs `work` and says how much CPU each party spent meanwhile. */
export async function withCpu<T>(
  meter: CpuMeter | undefined,
  work: () => Promise<T>,
): Promise<{ result: T; cpu: CpuSpent }> {
  const [workerd, node, server] = [await childrenCpuMs('workerd'), process.cpuUsage(), await meter?.read()];
  const result = await work();
  const nodeSpent = process.cpuUsage(node);
  const serverAfter = await meter?.read();
  return {
    result,
    cpu: {
      workerd: (await childrenCpuMs('workerd')) - workerd,
      node: (nodeSpent.user + nodeSpent.system) / 1000,
      postgres:
        server === undefined || serverAfter === undefined ? undefined : serverAfter.postgresMs - server.postgresMs,
    },
  };
}

/** CPU per unit of work, in ms, by party. */
export function cpuPer(cpu: CpuSpent, units: number): Record<keyof CpuSpent, number | undefined> {
  const per = (ms: number | undefined) => (ms === undefined ? undefined : Math.round((ms / units) * 100) / 100);
  return { workerd: per(cpu.workerd), node: per(cpu.node), postgres: per(cpu.postgres) };
}

interface ProcStat {
  pid: number;
  command: string;
  ppid: number;
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
}

/** /proc/<pid>/stat; the command name may hold spaces, so fields count from its closing parenthesis. */
async function readStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const command = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17), numbered from 1 at pid.
  const field = (n: number) => Number(fields[n - 3]);
  return { pid, command, ppid: field(4), utime: field(14), stime: field(15), cutime: field(16), cstime: field(17) };
}
