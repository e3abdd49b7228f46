/**
 * The project's one seeded random number generator (xoshiro128**): fast, good statistical quality, and a state of four
 * 32-bit words that can be saved in a checkpoint and restored, so a resumed run draws exactly the numbers an
 * uninterrupted one would have.
 */
export class Rng {
  private s: Uint32Array;

  /** A generator seeded from an integer (splitmix32 spreads nearby seeds apart). */
  constructor(seed: number) {
    this.s = new Uint32Array(4);
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
    if (this.s.every((w) => w === 0)) this.s[0] = 1;
  }

  /** A generator continuing from a saved state(). */
  static fromState(state: readonly number[]): Rng {
    if (state.length !== 4 || state.every((w) => w === 0)) throw new Error(`Rng state must be 4 words, not all 0`);
    const r = new Rng(0);
    r.s = Uint32Array.from(state);
    return r;
  }

  /** The four state words (JSON-serialisable). */
  state(): number[] {
    return Array.from(this.s);
  }

  /** A uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }

  /** A uniform number in [0, 1) with 32 random bits. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** A uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A standard normal sample (Box–Muller; one of the pair is discarded to keep the state simple). */
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Fisher–Yates shuffle in place; returns the array. */
  shuffle<T>(a: T[]): T[] {
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
