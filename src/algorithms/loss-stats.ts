/** Running statistics of a policy loss: means, importance-ratio range and clip fractions. */
import type { ClipSide } from './clipped-surrogate.js';

/** A running mean. */
export class Mean {
  private sum = 0;
  private n = 0;

  /** Adds one value. */
  add(x: number): void {
    this.sum += x;
    this.n++;
  }

  /** The mean, NaN when nothing was added. */
  get value(): number {
    return this.n === 0 ? NaN : this.sum / this.n;
  }
}

/** Importance-ratio statistics (NaN when no ratio was counted; fractions are then 0). */
export interface RatioStats {
  /** What a ratio is: one per counted token (GRPO) or one per counted sequence (GSPO). */
  ratioLevel: 'token' | 'sequence';
  /** Fraction of ratios below 1 − ε_low with the clip active in the min (A < 0). */
  clipFracLow: number;
  /** Fraction of ratios above 1 + ε_high with the clip active in the min (A > 0). */
  clipFracHigh: number;
  /** Fraction of ratios capped by the dual clip (A < 0, ratio > c); 0 without it. */
  clipFracDual: number;
  /** Mean importance ratio. */
  ratioMean: number;
  /** Smallest importance ratio. */
  ratioMin: number;
  /** Largest importance ratio. */
  ratioMax: number;
}

/** Counts ratios and which clip was active for each. */
export class RatioTally {
  private readonly ratios = new Mean();
  private min = Infinity;
  private max = -Infinity;
  private n = 0;
  private readonly sides: Record<ClipSide, number> = { none: 0, low: 0, high: 0, dual: 0 };

  /** A tally of token or sequence ratios. */
  constructor(private readonly level: RatioStats['ratioLevel']) {}

  /** Records one ratio and which clip was active for it. */
  add(ratio: number, side: ClipSide): void {
    this.ratios.add(ratio);
    this.min = Math.min(this.min, ratio);
    this.max = Math.max(this.max, ratio);
    this.sides[side]++;
    this.n++;
  }

  /** The statistics so far. */
  stats(): RatioStats {
    const frac = (k: number): number => (this.n === 0 ? 0 : k / this.n);
    return {
      ratioLevel: this.level,
      clipFracLow: frac(this.sides.low),
      clipFracHigh: frac(this.sides.high),
      clipFracDual: frac(this.sides.dual),
      ratioMean: this.ratios.value,
      ratioMin: this.n === 0 ? NaN : this.min,
      ratioMax: this.n === 0 ? NaN : this.max,
    };
  }
}
