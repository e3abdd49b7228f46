/** Statistics of paired comparisons: the same problems (and seeds) measured under two conditions. */

const Z95 = 1.959963984540054;

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

/** `+3.5 [+0.8, +6.2]` in points. */
export function formatDifference(d: Difference): string {
  const p = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)}`;
  return `${p(d.mean)} [${p(d.low)}, ${p(d.high)}]`;
}
