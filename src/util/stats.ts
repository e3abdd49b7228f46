/**
 * The project's statistics in one place: means, standard deviations, 95% intervals for proportions (Wilson) and
 * means, and paired comparisons (the same problems and seeds measured under two conditions).
 */

const Z95 = 1.959963984540054;

/** Arithmetic mean; NaN for an empty list (callers that want another value for "no data" say so where they call). */
export function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i]!;
  return xs.length ? s / xs.length : NaN;
}

/** Standard deviation; `ddof` 0 (population, default) or 1 (sample). NaN when fewer than ddof + 1 values. */
export function std(xs: ArrayLike<number>, ddof: 0 | 1 = 0): number {
  if (xs.length <= ddof) return NaN;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += (xs[i]! - m) ** 2;
  return Math.sqrt(s / (xs.length - ddof));
}

/** An accuracy with its 95% interval (Wilson for proportions, normal approximation for means of fractions). */
export interface Estimate {
  /** Point estimate in [0, 1]. */
  value: number;
  /** Lower end of the 95% interval. */
  low: number;
  /** Upper end of the 95% interval. */
  high: number;
  /** Problems it is computed over (problems with an unparseable gold are left out). */
  n: number;
}

/** Wilson score interval of `successes` out of `n` (sound near 0 and 1, unlike the normal approximation). */
export function wilson(successes: number, n: number): Estimate {
  if (n === 0) return { value: 0, low: 0, high: 1, n };
  const p = successes / n;
  const z2 = Z95 * Z95;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (Z95 * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
  // At 0 or n successes the exact bound is 0 or 1; computing it leaves a rounding residue.
  const low = successes === 0 ? 0 : Math.max(0, centre - half);
  const high = successes === n ? 1 : Math.min(1, centre + half);
  return { value: p, low, high, n };
}

/** Mean of per-problem fractions with a normal-approximation 95% interval, clamped to [0, 1]. */
export function meanInterval(values: readonly number[]): Estimate {
  const n = values.length;
  if (n === 0) return { value: 0, low: 0, high: 1, n };
  const m = values.reduce((a, b) => a + b, 0) / n;
  const variance = n > 1 ? values.reduce((a, b) => a + (b - m) ** 2, 0) / (n - 1) : 0;
  const half = Z95 * Math.sqrt(variance / n);
  return { value: m, low: Math.max(0, m - half), high: Math.min(1, m + half), n };
}

/** A difference (in accuracy points as a fraction, e.g. 0.05 = +5 points) with its 95% interval. */
export interface Difference {
  /** Mean of the per-item differences after − before. */
  mean: number;
  /** Lower end of the normal-approximation 95% interval. */
  low: number;
  /** Upper end. */
  high: number;
  /** Items paired. */
  n: number;
}

/**
 * The mean of `after[i] − before[i]` with a 95% interval from the spread of the per-item differences (a paired
 * t-style interval with the normal quantile): pairing removes the between-problem variance, so a change is resolved
 * with far fewer problems than two independent intervals need. Throws when the lists differ in length or are empty.
 */
export function pairedDifference(before: readonly number[], after: readonly number[]): Difference {
  if (before.length !== after.length)
    throw new Error(`paired difference needs equal lengths, got ${before.length} and ${after.length}`);
  const n = before.length;
  if (n === 0) throw new Error('paired difference of no items');
  const d = before.map((b, i) => after[i]! - b);
  const mean = d.reduce((s, x) => s + x, 0) / n;
  const variance = n > 1 ? d.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1) : 0;
  const half = Z95 * Math.sqrt(variance / n);
  return { mean, low: mean - half, high: mean + half, n };
}

/** A difference of rates (fractions) as signed points: `+3.5`, `−0.8`. */
export const formatPoints = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)}`;

/** `+3.5 [+0.8, +6.2]` in points. */
export function formatDifference(d: Difference): string {
  return `${formatPoints(d.mean)} [${formatPoints(d.low)}, ${formatPoints(d.high)}]`;
}

/** Two-sided 95% Student-t quantiles for 1–30 degrees of freedom (the normal 1.96 beyond). */
const T95 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** A mean over seeds with its 95% interval. */
export interface SeedMean {
  mean: number;
  low: number;
  high: number;
  /** Seeds averaged. */
  seeds: number;
}

/**
 * Mean of per-seed values with a Student-t 95% interval over seeds (seed-to-seed spread dominates at this size);
 * `fallback` gives the interval when there is a single seed (e.g. Wilson over problems).
 */
export function seedMean(values: readonly number[], fallback: () => { low: number; high: number }): SeedMean {
  const n = values.length;
  if (n === 0) throw new Error('a table cell with no finished run');
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, ...fallback(), seeds: 1 };
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  const half = (T95[n - 2] ?? 1.96) * (sd / Math.sqrt(n));
  return { mean, low: mean - half, high: mean + half, seeds: n };
}

/** Accuracy over seeds from each seed's 0/1 results per problem: a t interval over seeds, Wilson with one seed. */
export function accuracyOverSeeds(perSeed: readonly (readonly number[])[]): SeedMean {
  return seedMean(perSeed.map(mean), () => {
    const w = wilson(
      perSeed[0]!.reduce((a, b) => a + b, 0),
      perSeed[0]!.length,
    );
    return { low: w.low, high: w.high };
  });
}

/**
 * `after − before` paired by seed and item: the mean over seeds of each seed's mean difference, with a Student-t 95%
 * interval over seeds (training randomness dominates at this size); with one seed, the paired interval over items.
 */
export function seedPairedDifference(
  perSeed: readonly { before: readonly number[]; after: readonly number[] }[],
): Difference & { seeds: number } {
  const diffs = perSeed.map((p) => pairedDifference(p.before, p.after));
  if (diffs.length === 1) return { ...diffs[0]!, seeds: 1 };
  const m = seedMean(
    diffs.map((d) => d.mean),
    () => ({ low: NaN, high: NaN }),
  );
  return { mean: m.mean, low: m.low, high: m.high, n: diffs[0]!.n, seeds: m.seeds };
}
