/**
 * Warm starts that stop inside a band of success. A fixed number of SFT steps lands wherever the learning curve is at
 * that step, and on a steep curve that depends on the CPU's rounding (the same Plan-Path recipe: 48% greedy on one
 * CPU, 84% on another). Training in fixed chunks and stopping at the first chunk whose greedy success on calibration
 * instances reaches the band makes where the warm start lands the stated quantity and the step count the measured one.
 * Where one chunk climbs past the whole band (Sudoku's single agent: 9% → 61% in 100 steps), training is deterministic,
 * so it is retraced from the start to the chunk before and checked in finer steps through the chunk that overshot.
 */
import { z } from 'zod';
import { calibrationSeeds } from '../workflows/play.js';

/** The band a warm start stops in, and how it is measured. */
export const WarmStartBandSchema = z
  .object({
    /** Lowest greedy success (fraction) inside the band; required, above 0 (a fresh agent already has 0). */
    low: z.number().gt(0, 'band.low must be above 0: an untrained agent already succeeds 0% of the time').max(1),
    /** Highest greedy success (fraction) inside the band; required, at least `low`. */
    high: z.number().max(1),
    /** SFT steps between two calibration evaluations; default 100. */
    every: z.number().int().positive().default(100),
    /**
     * After a chunk that jumps from below the band to above it: train again from the start to the chunk before and
     * check every ⌈every/refine⌉ steps through the chunk that overshot; 1 turns this off; default 4, at most 100.
     */
    refine: z.number().int().positive().max(100, 'band.refine is at most 100').default(4),
    /** Calibration instances per evaluation (seeds from CALIBRATION_SEED, never held-out ones); default 100, ≤ 10000. */
    instances: z.number().int().positive().max(10_000, 'band.instances is at most 10000').default(100),
    /**
     * Warm starts tried until one stops inside the band, each from the same fresh weights with the next SFT batch-order
     * seed; when none does, the one nearest the band is kept. Default 1 (absent: cache keys written without it hold),
     * at most 10.
     */
    attempts: z
      .number()
      .int()
      .min(1, 'band.attempts is at least 1 (one try): raise it')
      .max(10, 'band.attempts is at most 10: lower it')
      .optional(),
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
  /**
   * 'in-band'; 'above' when one chunk (after refining, one finer chunk) jumped from below the band to above it;
   * 'below' when maxSteps ran out.
   */
  outcome: 'in-band' | 'above' | 'below';
  /** Calibration success after every chunk, in the order evaluated (a refinement's points follow the overshoot). */
  curve: { steps: number; success: number }[];
}

/** Where a warm start stopped after `band.attempts` tries: the kept try's outcome, which one it was, and every try. */
export interface AttemptedBandOutcome extends BandOutcome {
  /** The kept try, from 1 (its batch-order seed is the warm start's seed + attempt − 1). */
  attempt: number;
  /** Every try's stop, in order. */
  attempts: Pick<BandOutcome, 'steps' | 'calibration' | 'outcome'>[];
}

/** One try of a banded warm start: its training, evaluation and retrace (as trainIntoBand takes them) and its result. */
export interface BandTry<T> {
  train: (steps: number) => Promise<void>;
  success: (seeds: readonly number[]) => Promise<number>;
  restart: () => Promise<void>;
  /** What the try produced (the trained model), read once it has stopped. */
  result: () => T;
}

/**
 * Trains in chunks of `band.every` steps (the last one shorter, ending at `maxSteps`) and after each calls
 * `success(seeds)` on the calibration seeds; stops at the first chunk whose success is at least `band.low`: 'in-band'
 * when it is at most `band.high`; when it overshot, `restart()` puts training back at step 0 (deterministic training
 * then retraces the same weights), it trains to the chunk before and checks every ⌈every/refine⌉ steps through the
 * chunk that overshot, stopping at the first at least `band.low` ('above' when even that finer chunk overshot); at
 * `maxSteps` it stops as 'below' (did not reach the band). The stop depends only on the evaluated successes, never on
 * time, so it is deterministic wherever training and evaluation are.
 */
export async function trainIntoBand(
  band: WarmStartBand,
  maxSteps: number,
  train: (steps: number) => Promise<void>,
  success: (seeds: readonly number[]) => Promise<number>,
  restart: () => Promise<void>,
): Promise<BandOutcome> {
  if (!Number.isInteger(maxSteps) || maxSteps < 1)
    throw new Error(`a banded warm start needs at least 1 step (warmStart.steps), got ${maxSteps}`);
  const seeds = calibrationSeeds(band.instances);
  const curve: BandOutcome['curve'] = [];
  const stop = (steps: number, s: number): BandOutcome => ({
    steps,
    calibration: s,
    outcome: s <= band.high ? 'in-band' : 'above',
    curve,
  });
  // Trains [from, to) in chunks of `size`, evaluating after each; the first success ≥ low, else null.
  const climb = async (from: number, to: number, size: number): Promise<BandOutcome | null> => {
    for (let steps = from; steps < to;) {
      const chunk = Math.min(size, to - steps);
      await train(chunk);
      steps += chunk;
      const s = await success(seeds);
      curve.push({ steps, success: s });
      if (s >= band.low) return stop(steps, s);
    }
    return null;
  };
  const first = await climb(0, maxSteps, band.every);
  if (first === null) {
    const last = curve.at(-1)!;
    return { steps: last.steps, calibration: last.success, outcome: 'below', curve };
  }
  const size = Math.ceil(band.every / band.refine);
  const before = curve.at(-2)?.steps ?? 0;
  if (first.outcome === 'in-band' || size >= first.steps - before) return first;
  await restart();
  await train(before);
  const fine = await climb(before, first.steps, size);
  // The finer chunks end where the overshoot was measured, so retraced training reaches the band by then.
  if (fine === null)
    throw new Error(
      `a warm start retraced to step ${first.steps} scored ${curve.at(-1)!.success} on calibration, not the ` +
        `${first.calibration} it scored there before: its training is not deterministic`,
    );
  return fine;
}

/** How far a stop's calibration success lies outside the band (0 inside it). */
export function bandMiss(band: Pick<WarmStartBand, 'low' | 'high'>, calibration: number): number {
  return Math.max(0, band.low - calibration, calibration - band.high);
}

/**
 * Up to `band.attempts` tries of trainIntoBand, try a (from 0) built by `begin(a)`: a stop outside the band on a steep
 * curve says as much about the batch order as about the recipe (Sokoban's workflow warm start: 28% at 1,000 steps with
 * one BLAS library, 3% after 3,000 with another), so a miss is tried again with the next batch order. Stops at the
 * first try inside the band; when none is, keeps the one nearest it (the earliest on a tie). Deterministic wherever
 * each try is, since the choice depends on calibration successes only.
 */
export async function trainIntoBandWithAttempts<T>(
  band: WarmStartBand,
  maxSteps: number,
  begin: (attempt: number) => BandTry<T>,
): Promise<{ result: T; band: AttemptedBandOutcome }> {
  const attempts: AttemptedBandOutcome['attempts'] = [];
  let kept: { result: T; band: BandOutcome; attempt: number } | undefined;
  for (let a = 0; a < (band.attempts ?? 1); a++) {
    const t = begin(a);
    const stop = await trainIntoBand(band, maxSteps, t.train, t.success, t.restart);
    attempts.push({ steps: stop.steps, calibration: stop.calibration, outcome: stop.outcome });
    if (kept === undefined || bandMiss(band, stop.calibration) < bandMiss(band, kept.band.calibration))
      kept = { result: t.result(), band: stop, attempt: a + 1 };
    if (stop.outcome === 'in-band') break;
  }
  return { result: kept!.result, band: { ...kept!.band, attempt: kept!.attempt, attempts } };
}
