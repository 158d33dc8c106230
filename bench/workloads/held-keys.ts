import type { GateResult } from '../ledger';
import { heldKeysRound, jobStates, migratedDatabase, seedHeld, seedPlain, type SingleClaims } from '../held-keys';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { formatNumber, percentile } from '../stats';
import type { BenchDatabase } from '../postgres';
import { bothGates, describeFigures, repetitions, reportRep, type Workload } from './harness';

/** The short queue the deep one is held against, as in (e). */
const SHALLOW = 1000;
/** The rows and the metric the target reads (bench/targets.ts). */
export const HELD_KEYS_SHALLOW_VARIANT = `${SHALLOW.toLocaleString('en-US')} plain jobs waiting`;
export const HELD_KEYS_CLAIM_METRIC = 'claim p50 ms';
export const HELD_KEYS_RATIO_METRIC = 'claim p50, deep ÷ 1,000 waiting';

/**
 * (k2) The claim beside held keys, skiplock only (the claim and the seed
 * are this tree's own: neither peer holds keyed jobs outside its claim,
 * and a --baseline tree is not measured here). One connection claims one
 * job and completes it, again and again, with 1,000 plain jobs waiting
 * (topped up after each claim), and with a deep backlog of jobs on keys of
 * one slot: each key's oldest job has its turn and waits, the rest are
 * held. In each repetition both series run back to back, their order
 * turning, so the ratio of their medians is of the same moment.
 *
 * The gate: no job left running, and each database holding what the
 * claims should have left: the short queue topped up to 1,000, and in the
 * deep one a waiting job per key still (each completion gives its key's
 * next job the turn) and the rest held.
 */
export const heldKeysWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const reps = repetitions(context);
  const deepVariant =
    `${scale.heldKeysJobs.toLocaleString('en-US')} jobs over ${scale.heldKeys.toLocaleString('en-US')} keys of one slot ` +
    `(${scale.heldKeys.toLocaleString('en-US')} waiting, the rest held)`;
  if (context.drivers.some((driver) => driver.name === 'skiplock')) {
    progress(`(k2) held keys · seeding ${SHALLOW} plain jobs, and ${deepVariant}`);
    const shallow = await migratedDatabase(context.server, 'skiplock_held_keys_a');
    const deep = await migratedDatabase(context.server, 'skiplock_held_keys_b');
    try {
      await seedPlain(shallow, SHALLOW);
      const seeded = await seedHeld(deep, scale.heldKeys, scale.heldKeysJobs);
      let claimed = 0;
      for (const rep of reps) {
        const round = await heldKeysRound(shallow, deep, rep - 1, scale.heldKeysClaims);
        claimed += scale.heldKeysClaims;
        const gate = bothGates(
          await expect(shallow, 'the short queue', { queued: SHALLOW }),
          await expect(deep, 'the deep backlog', {
            queued: scale.heldKeys,
            held: seeded - scale.heldKeys - claimed,
          }),
        );
        const ratio = percentile(round.B.claim, 0.5) / percentile(round.A.claim, 0.5);
        const base = { system: 'skiplock' as const, setup: 'defaults' as const };
        results.recordAll({ ...base, variant: HELD_KEYS_SHALLOW_VARIANT }, gate, figures(round.A));
        results.recordAll({ ...base, variant: deepVariant }, gate, [
          ...figures(round.B),
          { metric: HELD_KEYS_RATIO_METRIC, better: 'lower', value: ratio },
        ]);
        reportRep(
          'skiplock',
          rep,
          context,
          gate,
          `shallow ${describeFigures(figures(round.A))}; deep ${describeFigures(figures(round.B))}; ` +
            `deep ÷ shallow ${formatNumber(ratio)}×`,
        );
      }
    } finally {
      await shallow.drop();
      await deep.drop();
    }
  }
  return {
    id: 'held-keys',
    title: '(k2) Claim latency beside held keys',
    method: [
      `skiplock only: two databases of this tree's schema. One holds ${SHALLOW.toLocaleString('en-US')} plain jobs (batch enqueue); ` +
        `the other ${scale.heldKeysJobs.toLocaleString('en-US')} jobs over ${scale.heldKeys.toLocaleString('en-US')} concurrency keys ` +
        "of one slot, each key's oldest job waiting with its turn and the rest held, written in set-based INSERT ... SELECT as " +
        'enqueue leaves them; both are vacuumed and analyzed.',
      `A repetition runs ${scale.heldKeysClaims.toLocaleString('en-US')} cycles in each, one connection in series: \`claimBatch\` ` +
        "of one job (timed), then `completeMany` (timed apart; in the deep backlog it gives the key's next job its turn), and in the " +
        'short queue an untimed enqueue that keeps it at its depth. The two series run back to back, in turns (the short one first ' +
        'in odd repetitions), and the ratio of their median claims is taken within the repetition. The gate checks that nothing is ' +
        'left running, the short queue is at its depth, and in the deep backlog every key still has its waiting job.',
      'pg-boss and graphile-worker are not run: neither keeps jobs of a busy key out of its claim, so there is no held backlog to ' +
        "compare; (e) measures their claim against a deep queue. The same series, at bench:keys' sizes: `npm run bench:keys`.",
    ],
    parameters: {
      shallow: SHALLOW,
      deepJobs: scale.heldKeysJobs,
      keys: scale.heldKeys,
      claimsPerRepetition: scale.heldKeysClaims,
      repetitions: reps.length,
    },
    measurements: results.measurements,
  };
};

function figures(samples: SingleClaims): Figure[] {
  return [
    { metric: HELD_KEYS_CLAIM_METRIC, better: 'lower', value: percentile(samples.claim, 0.5) },
    { metric: 'claim p99 ms', better: 'lower', value: percentile(samples.claim, 0.99) },
    { metric: 'completion p50 ms', better: 'lower', value: percentile(samples.complete, 0.5) },
  ];
}

/** Passes when the database's jobs by state are `wanted` (states left out: none), with nothing running. */
async function expect(database: BenchDatabase, what: string, wanted: Record<string, number>): Promise<GateResult> {
  const states = await jobStates(database);
  const problems = [...new Set([...Object.keys(states), ...Object.keys(wanted)])]
    .filter((state) => (states[state] ?? 0) !== (wanted[state] ?? 0))
    .map((state) => `${what} has ${states[state] ?? 0} ${state} jobs, not ${wanted[state] ?? 0}`);
  return { passed: problems.length === 0, problems, unrecordedCompletions: 0 };
}
