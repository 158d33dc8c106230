import { cpus, release, totalmem, type } from 'node:os';
import type { BenchServer, ServerSettings } from './postgres';
import { readServerSettings } from './postgres';

export interface Environment {
  node: string;
  os: string;
  cpu: { model: string; cores: number };
  memoryGiB: number;
  postgres: ServerSettings & { origin: BenchServer['origin'] };
}

export async function readEnvironment(server: BenchServer): Promise<Environment> {
  const cores = cpus();
  return {
    node: process.version,
    os: `${type()} ${release()}`,
    cpu: { model: cores[0]?.model.trim() ?? 'unknown', cores: cores.length },
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    postgres: { ...(await readServerSettings(server.adminUrl)), origin: server.origin },
  };
}
