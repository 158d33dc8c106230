/**
 * `npm run bench:workerd-profile`: where the Worker's CPU goes. The reference
 * Worker's bundle (with its source map) runs in workerd alone, as in
 * bench:workerd; DevTools' sampling profiler records while clients send
 * REQUESTS single enqueues (fast path off, no cron: the request alone) and
 * then while the cron drain burns down JOBS no-op jobs. Each sample is named
 * by the source it came from (a package under node_modules, or a file of
 * src/), and the self time summed per source and per function (with its
 * line in its source). TOP sets how many are listed; PROFILE_DIR keeps both
 * profiles and the bundle's map there, to open in DevTools.
 *
 * Prints one JSON object: CPU milliseconds per request and per job as the
 * profiler saw them, and the top sources and functions by share.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { anyFreePort } from '../src/local/ports';
import { startScheduledTrigger } from '../src/local/scheduled-trigger';
import { adminHeaders, createBenchDatabase } from './worker-stack';
import { startWorkerdStack } from './workerd-stack';
import { round } from './worker-workloads';

const requests = Number(process.env.REQUESTS ?? 3000);
const jobs = Number(process.env.JOBS ?? 10_000);
/** Sources and functions listed, largest first. */
const TOP = Number(process.env.TOP ?? 15);
/** When set, each profile is written there too (enqueue.cpuprofile, drain.cpuprofile), for DevTools. */
const profileDir = process.env.PROFILE_DIR;
const CLIENTS = 8;
const SAMPLING_INTERVAL_US = 100;

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface Profile {
  nodes: Array<{ id: number; callFrame: CallFrame }>;
  samples: number[];
  timeDeltas: number[];
}

/** One DevTools session on workerd's isolate. */
interface Inspector {
  send<T>(method: string, params?: Record<string, unknown>): Promise<T>;
  close(): void;
}

async function connectInspector(port: number): Promise<Inspector> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    title: string;
    webSocketDebuggerUrl: string;
  }>;
  // The user Worker's isolate, not Miniflare's own entry Worker.
  const target = targets.find((t) => t.title.includes('core:user')) ?? targets[0];
  if (target === undefined) throw new Error('workerd listed no inspector target');
  const socket = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  let nextId = 0;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  socket.on('message', (data) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
    const waiting = message.id === undefined ? undefined : pending.get(message.id);
    if (waiting === undefined) return;
    pending.delete(message.id!);
    if (message.error) waiting.reject(new Error(message.error.message));
    else waiting.resolve(message.result);
  });
  return {
    send<T>(method: string, params: Record<string, unknown> = {}) {
      const id = ++nextId;
      socket.send(JSON.stringify({ id, method, params }));
      return new Promise<T>((resolve, reject) =>
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject }),
      );
    },
    close: () => socket.close(),
  };
}

async function profiled(inspector: Inspector, name: string, run: () => Promise<void>): Promise<Profile> {
  await inspector.send('Profiler.enable');
  await inspector.send('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US });
  await inspector.send('Profiler.start');
  await run();
  const { profile } = await inspector.send<{ profile: Profile }>('Profiler.stop');
  if (profileDir !== undefined) await writeFile(join(profileDir, `${name}.cpuprofile`), JSON.stringify(profile));
  return profile;
}

/** Where a sample's function is: its source, and its line there when the bundle maps it. */
interface Place {
  /** `zod`, `@neondatabase/serverless`, `src/http/routes/enqueue.ts`... */
  source: string;
  /** `index.mjs:1234` (a package's file) or `enqueue.ts:42`: minified packages name their functions `m`. */
  line?: string;
}

/** The source a bundle position came from, and the line. */
function sourceNamer(map: SourceMap): (frame: CallFrame) => Place {
  return (frame) => {
    if (frame.url === '') return { source: frame.functionName || '(runtime)' };
    if (!frame.url.endsWith('worker.js')) return { source: '(runtime)' };
    const entry = map.findEntry(frame.lineNumber, frame.columnNumber);
    if (!('originalSource' in entry)) return { source: '(bundle)' };
    const source = String(entry.originalSource);
    const line = `${source.slice(source.lastIndexOf('/') + 1)}:${entry.originalLine + 1}`;
    const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(source);
    if (inPackage) return { source: inPackage[1]!, line };
    const inSrc = /\/(src\/.*)$/.exec(source);
    return { source: inSrc ? inSrc[1]! : source || '(bundle)', line };
  };
}

interface Share {
  name: string;
  ms: number;
  percent: number;
}

/** Self time per source and per function, largest first; idle time left out. */
function breakdown(profile: Profile, placeOf: (frame: CallFrame) => Place, top: number) {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const bySource = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busyUs = 0;
  profile.samples.forEach((id, index) => {
    const frame = frames.get(id)!;
    if (frame.functionName === '(idle)') return;
    const us = profile.timeDeltas[index] ?? 0;
    busyUs += us;
    const { source, line } = placeOf(frame);
    bySource.set(source, (bySource.get(source) ?? 0) + us);
    const fn = `${frame.functionName || '(anonymous)'} (${line === undefined ? source : `${source}, ${line}`})`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  });
  const shares = (totals: Map<string, number>): Share[] =>
    [...totals]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: round(us / 1000), percent: round((100 * us) / busyUs) }));
  return { busyMs: busyUs / 1000, sources: shares(bySource), functions: shares(byFunction) };
}

async function enqueueSingles(api: string, queue: string, count: number): Promise<void> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (sent < count) {
        sent += 1;
        const response = await fetch(`${api}/v1/queues/${queue}/jobs`, {
          method: 'POST',
          headers: adminHeaders,
          body: JSON.stringify({ type: 'noop' }),
        });
        await response.arrayBuffer();
        if (response.status !== 201) throw new Error(`enqueue: ${response.status}`);
      }
    }),
  );
}

async function main(): Promise<void> {
  const database = await createBenchDatabase('workerd_profile');
  const inspectorPort = await anyFreePort();
  const workerd = await startWorkerdStack(
    database.url,
    { FAST_PATH: 'off' },
    { sourceMaps: true, inspectorPort, cron: false },
  );
  const mapText = await readFile(join(workerd.bundleDir, 'worker.js.map'), 'utf8');
  // DevTools names the profiles' functions from the bundle's map beside them.
  if (profileDir !== undefined) await writeFile(join(profileDir, 'worker.js.map'), mapText);
  const map = new SourceMap(JSON.parse(mapText) as SourceMapPayload);
  const placeOf = sourceNamer(map);
  const inspector = await connectInspector(inspectorPort);
  try {
    // Warm: the isolate compiles and caches what a request touches.
    await enqueueSingles(workerd.url, 'warm', 300);
    const enqueueProfile = await profiled(inspector, 'enqueue', () =>
      enqueueSingles(workerd.url, 'profiled', requests),
    );
    const enqueue = breakdown(enqueueProfile, placeOf, TOP);

    const batch = Array.from({ length: 1000 }, () => ({ type: 'noop' }));
    for (let sent = 0; sent < jobs; sent += 1000) {
      const response = await fetch(`${workerd.url}/v1/queues/drained/jobs/batch`, {
        method: 'POST',
        headers: adminHeaders,
        body: JSON.stringify({ jobs: batch }),
      });
      if (!response.ok) throw new Error(`batch enqueue: ${response.status}`);
    }
    const drainProfile = await profiled(inspector, 'drain', async () => {
      const trigger = startScheduledTrigger(workerd.entryUrl, { crons: ['* * * * *'], everySeconds: 1 }, () => {});
      try {
        for (;;) {
          const [row] = await database.db.query<{ left: number }>({
            text: "SELECT count(*)::int AS left FROM skiplock.jobs WHERE queue = 'drained'",
            params: [],
          });
          if (row!.left === 0) break;
          await sleep(250);
        }
      } finally {
        trigger.stop();
      }
    });
    const drain = breakdown(drainProfile, placeOf, TOP);
    console.log(
      JSON.stringify(
        {
          enqueue: { requests, cpuMsPerRequest: round(enqueue.busyMs / requests), ...enqueue, busyMs: undefined },
          drain: { jobs, cpuMsPerJob: round(drain.busyMs / jobs), ...drain, busyMs: undefined },
        },
        null,
        2,
      ),
    );
  } finally {
    inspector.close();
    await workerd.stop();
    await database.drop();
  }
}

await main();
