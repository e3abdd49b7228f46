/**
 * Warm starts that stop inside a band of success. A fixed number of SFT steps lands wherever the learning curve is at
 * that step, and on a steep curve that depends on the CPU's rounding (the same Plan-Path recipe: 48% greedy on one
 * CPU, 84% on another). Training in fixed chunks and stopping at the first chunk whose greedy success on calibration
 * instances reaches the band makes where the warm start lands the stated quantity and the step count the measured one.
 */
import { z } from 'zod';
import { calibrationSeeds } from '../train/workflow-source.js';

/** The band a warm start stops in, and how it is measured. */
export const WarmStartBandSchema = z
  .object({
    /** Lowest greedy success (fraction) inside the band; required, above 0 (a fresh agent already has 0). */
    low: z.number().gt(0, 'band.low must be above 0: an untrained agent already succeeds 0% of the time').max(1),
    /** Highest greedy success (fraction) inside the band; required, at least `low`. */
    high: z.number().max(1),
    /** SFT steps between two calibration evaluations; default 100. */
    every: z.number().int().positive().default(100),
    /** Calibration instances per evaluation (seeds from CALIBRATION_SEED, never held-out ones); default 100, ≤ 10000. */
    instances: z.number().int().positive().max(10_000, 'band.instances is at most 10000').default(100),
  })
  .strict()
  .refine((b) => b.high >= b.low, { message: 'band.high must be at least band.low', path: ['high'] });
/** A band with defaults filled in. */
export type WarmStartBand = z.output<typeof WarmStartBandSchema>;

/** Where a banded warm start stopped. */
export interface BandOutcome {
  /** SFT steps trained. */
  steps: number;
  /** Greedy success on the calibration instances after those steps. */
  calibration: number;
  /** 'in-band'; 'above' when one chunk jumped from below the band to above it; 'below' when maxSteps ran out. */
  outcome: 'in-band' | 'above' | 'below';
  /** Calibration success after every chunk, in order (the learning curve seen). */
  curve: { steps: number; success: number }[];
}

/**
 * Trains in chunks of `band.every` steps (the last one shorter, ending at `maxSteps`) and after each calls
 * `success(seeds)` on the calibration seeds; stops at the first chunk whose success is at least `band.low`: 'in-band'
 * when it is at most `band.high`, 'above' when the chunk overshot (more training would only go further up), or at
 * `maxSteps` as 'below' (did not reach the band). The stop depends only on the evaluated successes, never on time,
 * so it is deterministic wherever training and evaluation are.
 */
export async function trainIntoBand(
  band: WarmStartBand,
  maxSteps: number,
  train: (steps: number) => Promise<void>,
  success: (seeds: readonly number[]) => Promise<number>,
): Promise<BandOutcome> {
  if (!Number.isInteger(maxSteps) || maxSteps < 1)
    throw new Error(`a banded warm start needs at least 1 step (warmStart.steps), got ${maxSteps}`);
  const seeds = calibrationSeeds(band.instances);
  const curve: BandOutcome['curve'] = [];
  for (let steps = 0; steps < maxSteps;) {
    const chunk = Math.min(band.every, maxSteps - steps);
    await train(chunk);
    steps += chunk;
    const s = await success(seeds);
    curve.push({ steps, success: s });
    if (s >= band.low) return { steps, calibration: s, outcome: s <= band.high ? 'in-band' : 'above', curve };
  }
  const last = curve.at(-1)!;
  return { steps: last.steps, calibration: last.success, outcome: 'below', curve };
}
