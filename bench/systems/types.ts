/**
 * The one interface the workloads drive every queue through. A workload
 * never knows which system it runs: it enqueues BenchJobs, starts workers
 * with a handler, stops them and reads the final state.
 */

/** The peers, skiplock, and skiplock at a baseline commit (`--baseline`). */
export type SystemName = 'skiplock' | 'pg-boss' | 'graphile-worker' | `skiplock@${string}`;
export type SetupName = 'defaults' | 'tuned';
export const SETUPS: readonly SetupName[] = ['defaults', 'tuned'];

/** What each job carries. `n` is unique per run: the handler counts runs per `n`. */
export interface BenchJob {
  n: number;
  /** skiplock files the job under this tenant; the peers, which have none, only carry it in the payload. */
  tenant?: string;
  /** A key that limits the job beside others of the same key (the keys workload); none by default. */
  key?: JobKey;
}

/**
 * What a key limits. `serial`: one job of the key runs at a time
 * (skiplock's concurrency key of limit 1, pg-boss's singleton key,
 * graphile-worker's named queue; bench/workloads/keys.ts says how they
 * differ). `rate`: at most KEY_RATE_LIMIT starts of the key a second, a
 * limit the benchmark never reaches, so what is measured is the counting
 * (skiplock's rate key; the peers have none).
 */
export type KeyKind = 'serial' | 'rate';

export interface JobKey {
  kind: KeyKind;
  name: string;
}

export const KEY_RATE_LIMIT = 10_000;

/** The payload every system stores: the same for all, about 150 bytes of JSON. */
export interface BenchPayload {
  n: number;
  tenant: string;
  text: string;
}

const FILLER =
  'lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua';

export function payloadOf(job: BenchJob): BenchPayload {
  return { n: job.n, tenant: job.tenant ?? 'default', text: FILLER };
}

export type JobHandler = (payload: BenchPayload) => Promise<void>;

/** A system's durable steps, as a handler sees them (skiplock's `ctx.step`). */
export interface DurableSteps {
  /** Runs `fn` once and records its result before it answers. */
  do(name: string, fn: () => unknown): Promise<unknown>;
}

/** A handler that runs durable steps. */
export type StepsHandler = (payload: BenchPayload, step: DurableSteps) => Promise<void>;

/** How an idle worker learns of a new job. */
export type Wakeup = 'listen' | 'poll';

export interface WorkerStart {
  /** Jobs running at once. Every system gets `concurrency + 2` worker connections. */
  concurrency: number;
  handler: JobHandler;
  /** One of the driver's `wakeups`; its first when left out. */
  wakeup?: Wakeup;
  /** The jobs carry `serial` keys: pg-boss keeps them in a queue of the singleton policy, which its workers then work. */
  serialKeys?: boolean;
}

export interface RunningWorkers {
  /** Graceful: what runs finishes and is recorded; resolves once the workers' connections are closed. */
  stop(): Promise<void>;
}

/** The jobs in the database by what happened to them. */
export interface Inventory {
  waiting: number;
  running: number;
  /** Null for a system that deletes finished jobs (graphile-worker). */
  succeeded: number | null;
  failed: number;
  /** Finished jobs that took more than one attempt; null where the system does not keep them. */
  redelivered: number | null;
}

export type Settings = Record<string, string | number | boolean>;

export interface QueueSystem {
  readonly name: SystemName;
  readonly setup: SetupName;
  /** The schema holding the system's tables: their size and dead tuples are its database cost. */
  readonly schema: string;
  /** How often an idle worker of this setup looks for jobs, in ms. */
  readonly pollIntervalMs: number;
  /** A piece of the claim statement's text, to find it in pg_stat_statements. */
  readonly claimStatementMarker: string;
  enqueue(job: BenchJob): Promise<void>;
  /** At most BULK_SIZE jobs, in one call of the system's batch API. */
  enqueueBatch(jobs: readonly BenchJob[]): Promise<void>;
  startWorkers(start: WorkerStart): Promise<RunningWorkers>;
  /**
   * As startWorkers, with a handler given the system's durable steps.
   * Absent where the library has none (pg-boss, graphile-worker).
   */
  readonly startStepWorkers?: (
    start: Omit<WorkerStart, 'handler'> & { handler: StepsHandler },
  ) => Promise<RunningWorkers>;
  /**
   * Claims up to `max` jobs, runs the handler on each and completes them
   * through the library's own claim and complete calls, with no worker loop
   * around them; returns how many it claimed. Absent where the library has
   * no public claim call (graphile-worker).
   */
  readonly claimDirect?: (max: number, handler: JobHandler) => Promise<number>;
  inventory(): Promise<Inventory>;
  /**
   * Inserts `waiting` jobs numbered from `firstN` and `finished` succeeded
   * jobs straight into the tables in bulk SQL (the depth workload's backlog:
   * a million jobs through the API would take longer than the measurement).
   */
  fill(options: { firstN: number; waiting: number; finished: number }): Promise<void>;
  close(): Promise<void>;
}

export interface SystemDriver {
  readonly name: SystemName;
  /** How its workers can wait for work; the first is how they run unless told otherwise. */
  readonly wakeups: readonly Wakeup[];
  /** The kinds of `BenchJob.key` it keeps. */
  readonly keyKinds: readonly KeyKind[];
  /** The installed library's version, read from its package.json. */
  readonly version: string;
  /** The library's options in each setup, as the report prints them. */
  readonly settings: Record<SetupName, Settings>;
  /** Installs the system's schema in the (fresh) database and opens a producer. */
  open(databaseUrl: string, setup: SetupName): Promise<QueueSystem>;
}
