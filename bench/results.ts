import type { Json } from '../src/engine/types';
import type { WorkloadId } from './config';
import { UNRECORDED_FLAG, type GateResult } from './ledger';
import { percentile } from './stats';
import type { SetupName, SystemName } from './systems/types';

export type Better = 'higher' | 'lower';

/** Which figure, of which system in which setup, under which variant of the workload (a concurrency, a rate...). */
export interface MeasurementKey {
  metric: string;
  better: Better;
  setup: SetupName;
  variant: string;
  system: SystemName;
}

export interface Measurement extends MeasurementKey {
  /** One value per repetition that passed its gate. */
  values: number[];
  /** Why a repetition failed its gate; any failure hides the figure. */
  failures: string[];
  /** A short note printed beside the figure, when some repetition needs one (a cap was hit...). */
  flags: string[];
  /** Raw figures of every repetition, for the JSON file. */
  details: Json[];
}

export interface WorkloadReport {
  id: WorkloadId;
  title: string;
  /** How it was measured, one paragraph per entry. */
  method: string[];
  parameters: Record<string, Json>;
  measurements: Measurement[];
  /**
   * The machine's 1-minute load average as the workload started and ended:
   * anything else running on the machine shows here (set by main).
   */
  loadAverage?: { start: number; end: number };
}

/** What one repetition gives for one figure: a value, or a failed gate. */
export type Outcome = { value: number; flags: string[]; details?: Json } | { gate: GateResult; details?: Json };

/** Collects the repetitions of a workload's figures, in the order they were first recorded. */
export class Results {
  private readonly byKey = new Map<string, Measurement>();

  private record(key: MeasurementKey, outcome: Outcome): void {
    const id = JSON.stringify([key.metric, key.setup, key.variant, key.system]);
    let measurement = this.byKey.get(id);
    if (measurement === undefined) {
      measurement = { ...key, values: [], failures: [], flags: [], details: [] };
      this.byKey.set(id, measurement);
    }
    if ('value' in outcome) {
      measurement.values.push(outcome.value);
      for (const flag of outcome.flags) if (!measurement.flags.includes(flag)) measurement.flags.push(flag);
    } else {
      measurement.failures.push(outcome.gate.problems.join('; '));
    }
    if (outcome.details !== undefined) measurement.details.push(outcome.details);
  }

  /** Several figures of one repetition that share its gate: all shown, or none. */
  recordAll(
    base: Omit<MeasurementKey, 'metric' | 'better'>,
    gate: GateResult,
    figures: readonly Figure[],
    details?: Json,
  ): void {
    figures.forEach((figure, index) => {
      const key = { ...base, metric: figure.metric, better: figure.better };
      const withDetails = index === 0 && details !== undefined ? { details } : {};
      if (!gate.passed) this.record(key, { gate, ...withDetails });
      else this.record(key, { value: figure.value, flags: figureFlags(figure, gate), ...withDetails });
    });
  }

  get measurements(): Measurement[] {
    return [...this.byKey.values()];
  }
}

export interface Figure {
  metric: string;
  better: Better;
  value: number;
  flag?: string;
}

function figureFlags(figure: Figure, gate: GateResult): string[] {
  return [
    ...(figure.flag === undefined ? [] : [figure.flag]),
    ...(gate.unrecordedCompletions > 0 ? [UNRECORDED_FLAG] : []),
  ];
}

/** The two figures every latency table shows: median and 99th percentile, in ms. */
export function latencyFigures(latenciesMs: readonly number[]): Figure[] {
  return [
    { metric: 'p50 ms', better: 'lower', value: percentile(latenciesMs, 0.5) },
    { metric: 'p99 ms', better: 'lower', value: percentile(latenciesMs, 0.99) },
  ];
}
