/**
 * How big a benchmark run is. `full` is what docs/benchmarks.md publishes
 * (about 65 minutes on 2 cores); `quick` runs every workload and every
 * correctness gate at toy sizes and once, to check the harness in under 3
 * minutes, and writes its report to the temporary folder, never over the
 * published one. Sizes come from the scale; flags and environment variables
 * choose the scale, the repetitions and a subset.
 */
export type ScaleName = 'quick' | 'full';

export interface Scale {
  name: ScaleName;
  /** Repetitions unless --reps says otherwise; the published (full) tables are medians of at least 3. */
  reps: number;
  /** (a) jobs enqueued one per call, and in calls of BULK_SIZE. */
  enqueueSingleJobs: number;
  enqueueBulkJobs: number;
  /**
   * (b) jobs pre-inserted per burn-down; a run goes to the end of the
   * backlog, or stops after `burnDownCapSeconds` of work (a slow system),
   * repeated `burnDownReps` times (at least: --reps may ask for more).
   */
  burnDownJobs: number;
  burnDownCapSeconds: number;
  burnDownReps: number;
  /** (c) jobs timed per repetition, and the most one repetition may take. */
  latencySamples: number;
  latencyCapSeconds: number;
  /** (d) how long capacity is measured, and the length of one steady-state run (its thirds are the repetitions). */
  steadyCapacitySeconds: number;
  steadySeconds: number;
  /** (e) the deep queue: waiting and finished jobs, and how long each claim series runs. */
  depthWaiting: number;
  depthFinished: number;
  depthSeconds: number;
  /** (f) the big tenant's backlog, and how many job starts (at most how long) we watch for the small tenant's jobs. */
  fairnessBacklog: number;
  fairnessClaimsWatched: number;
  fairnessWatchSeconds: number;
  /** (k) jobs per keyed or plain burn-down, and the most one may take. */
  keysJobs: number;
  keysCapSeconds: number;
  /** (k2) the deep backlog's jobs and the keys of one slot they are held on, and the single claims of each series per repetition. */
  heldKeysJobs: number;
  heldKeys: number;
  heldKeysClaims: number;
  /** (g) jobs enqueued one per call and then drained (for at most `costCapSeconds`), whose database cost is counted. */
  costJobs: number;
  costCapSeconds: number;
  /** (h) each window, before and while the snapshot is held. */
  snapshotWindowSeconds: number;
  /** (4) jobs loaded for each tight loop, and how long it runs. */
  ceilingJobs: number;
  ceilingSeconds: number;
  /** (w) jobs per burn-down through the Worker, and how long the 64 clients enqueue. */
  workersJobs: number;
  workersBurstSeconds: number;
  /**
   * (s) durable steps: jobs of STEPS_PER_JOB steps each, drained (for at most
   * `stepsCapSeconds`) beside a burn-down of as many no-op jobs, repeated
   * `stepsReps` times (at least).
   */
  stepsJobs: number;
  stepsCapSeconds: number;
  stepsReps: number;
}

export const BULK_SIZE = 1000;
export const PRODUCERS = 8;
export const BURN_DOWN_CONCURRENCIES = [1, 8, 32] as const;
/** The worker concurrency of every workload that does not vary it. */
export const STANDARD_CONCURRENCY = 8;
/** (s) The `ctx.step.do` calls of each job of the steps workload. */
export const STEPS_PER_JOB = 10;
/**
 * (s) The concurrencies of the steps workload: the burn-down's, and one
 * above them. A job's steps run one after another, each waiting for its
 * record, so steps at once are at most the concurrency.
 */
export const STEPS_CONCURRENCIES = [8, 32, 128] as const;
/** (k) The distinct keys the keys workload's jobs are spread over. */
export const KEY_COUNT = 1_000;

const SCALES: Record<ScaleName, Scale> = {
  quick: {
    name: 'quick',
    reps: 1,
    enqueueSingleJobs: 200,
    enqueueBulkJobs: 3_000,
    burnDownJobs: 3_000,
    burnDownCapSeconds: 1.5,
    burnDownReps: 1,
    latencySamples: 6,
    latencyCapSeconds: 2,
    steadyCapacitySeconds: 1,
    steadySeconds: 2,
    depthWaiting: 20_000,
    depthFinished: 20_000,
    depthSeconds: 1,
    fairnessBacklog: 3_000,
    fairnessClaimsWatched: 300,
    fairnessWatchSeconds: 1.5,
    keysJobs: 3_000,
    keysCapSeconds: 2,
    heldKeysJobs: 20_000,
    heldKeys: 1_000,
    heldKeysClaims: 100,
    costJobs: 200,
    costCapSeconds: 2,
    snapshotWindowSeconds: 1,
    ceilingJobs: 5_000,
    ceilingSeconds: 0.5,
    workersJobs: 1_000,
    workersBurstSeconds: 3,
    stepsJobs: 200,
    stepsCapSeconds: 3,
    stepsReps: 1,
  },
  // Sized so the whole run takes about an hour on 2 cores: every system in
  // both setups, 3 repetitions (5 for the burn-down, whose figures swing most
  // with the machine's load), the sizes the issues name where they fit
  // (burn-downs of 200,000 jobs that run to the end or 20 s, 1,000,000
  // waiting and 1,000,000 finished, 1,000,000 jobs held on 10,000 keys) and short time windows where they do not
  // (steady state: 30 s per load level; keys: 30,000 jobs, to the end or
  // 10 s, three runs a repetition). Pickup latency takes 200 samples a
  // repetition: of 40, the p99 was the slowest sample, whichever it was.
  // The database cost runs 100,000 jobs: at 2,000, the empty schema and a
  // page more or less weighed on the bytes per job as much as the jobs did.
  full: {
    name: 'full',
    reps: 3,
    enqueueSingleJobs: 2_000,
    enqueueBulkJobs: 30_000,
    burnDownJobs: 200_000,
    burnDownCapSeconds: 20,
    burnDownReps: 5,
    latencySamples: 200,
    latencyCapSeconds: 15,
    steadyCapacitySeconds: 6,
    steadySeconds: 30,
    depthWaiting: 1_000_000,
    depthFinished: 1_000_000,
    depthSeconds: 3,
    fairnessBacklog: 100_000,
    fairnessClaimsWatched: 2_000,
    fairnessWatchSeconds: 8,
    keysJobs: 30_000,
    keysCapSeconds: 10,
    heldKeysJobs: 1_000_000,
    heldKeys: 10_000,
    heldKeysClaims: 500,
    costJobs: 100_000,
    costCapSeconds: 60,
    snapshotWindowSeconds: 5,
    ceilingJobs: 30_000,
    ceilingSeconds: 2,
    workersJobs: 10_000,
    workersBurstSeconds: 20,
    stepsJobs: 1_000,
    stepsCapSeconds: 20,
    stepsReps: 5,
  },
};

export const WORKLOAD_IDS = [
  'enqueue',
  'burn-down',
  'latency',
  'snapshot',
  'steady',
  'depth',
  'fairness',
  'keys',
  'held-keys',
  'cost',
  'ceiling',
  'workers',
  'steps',
] as const;
export type WorkloadId = (typeof WORKLOAD_IDS)[number];

export interface BenchOptions {
  scale: Scale;
  /** Repetitions of every measurement; at least 3. */
  reps: number;
  workloads: readonly WorkloadId[];
  systems: readonly string[] | undefined;
  /** A commit to measure beside this tree, as the system `skiplock@<ref>`. */
  baseline: string | undefined;
  /** The exact command line, for the report. */
  command: string;
}

const USAGE = `npm run bench [-- --quick|--full] [--reps N] [--only w1,w2] [--systems s1,s2] [--baseline REF]
  env: BENCH_SCALE=quick|full  BENCH_REPS=N  BENCH_ONLY=w1,w2  BENCH_SYSTEMS=s1,s2  BENCH_BASELINE=REF  DATABASE_URL=postgres://...
  workloads: ${WORKLOAD_IDS.join(', ')}`;

/** Flags win over environment variables; the default is the full run. */
export function readOptions(argv: readonly string[], env: NodeJS.ProcessEnv): BenchOptions {
  let scaleName: string = env.BENCH_SCALE ?? 'full';
  let reps = env.BENCH_REPS;
  let only = env.BENCH_ONLY;
  let systems = env.BENCH_SYSTEMS;
  let baseline = env.BENCH_BASELINE;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => argv[++i] ?? fail(`${flag} needs a value`);
    if (flag === '--quick' || flag === '--full') scaleName = flag.slice(2);
    else if (flag === '--reps') reps = value();
    else if (flag === '--only') only = value();
    else if (flag === '--systems') systems = value();
    else if (flag === '--baseline') baseline = value();
    else fail(`unknown flag ${flag}`);
  }
  if (scaleName !== 'quick' && scaleName !== 'full') fail(`BENCH_SCALE must be quick or full, not ${scaleName}`);
  const scale = SCALES[scaleName];
  const repCount = reps === undefined ? scale.reps : Number(reps);
  if (!Number.isInteger(repCount) || repCount < 1) fail('BENCH_REPS must be a whole number of at least 1');
  if (scale.name === 'full' && repCount < 3) fail('a full run takes at least 3 repetitions: its tables are medians');
  const workloads = only === undefined ? WORKLOAD_IDS : only.split(',').map((id) => id.trim());
  const unknown = workloads.filter((id) => !(WORKLOAD_IDS as readonly string[]).includes(id));
  if (unknown.length > 0) fail(`unknown workload ${unknown.join(', ')}`);
  const envPart = ['BENCH_SCALE', 'BENCH_REPS', 'BENCH_ONLY', 'BENCH_SYSTEMS', 'BENCH_BASELINE']
    .filter((name) => env[name] !== undefined)
    .map((name) => `${name}=${env[name]}`);
  return {
    scale,
    reps: repCount,
    workloads: workloads as WorkloadId[],
    systems: systems?.split(',').map((name) => name.trim()),
    baseline,
    command: [...envPart, 'npm run bench', ...(argv.length > 0 ? ['--', ...argv] : [])].join(' '),
  };
}

function fail(message: string): never {
  console.error(`${message}\n\n${USAGE}`);
  process.exit(2);
}
