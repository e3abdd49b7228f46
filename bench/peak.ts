/** The machine's FMA peak as every benchmark measures it: one probe, so bench:kernels, bench:model and bench:rl agree. */
import type { NativeExtras } from '../src/backend/native.js';

/** What {@link machinePeak} measured. */
export interface MachinePeak {
  /** Best FMA GFLOP/s per thread count over the interleaved rounds. */
  gflops: Record<number, number>;
  /** Thread counts whose best stayed below 75% of linear scaling from 1 thread: another process held a core. */
  below_linear: number[];
}

/**
 * FMA peak (GFLOP/s) for each of `threadCounts`, 1 thread always included as the scaling reference. One probe of
 * 500 ms read a 2-thread peak equal to the 1-thread one when another process held a core for that half second (a
 * quiet-machine bench:model run printed 244 GFLOP/s for 2 threads, its bench:rl 40 s later 466); three rounds of
 * `ms` milliseconds (default 200) per count, interleaved, keep the best, and a count still below linear is listed.
 */
export function machinePeak(native: Pick<NativeExtras, 'fmaPeak'>, threadCounts: number[], ms = 200): MachinePeak {
  const counts = [...new Set([1, ...threadCounts])].sort((a, b) => a - b);
  const gflops: Record<number, number> = {};
  for (let round = 0; round < 3; round++)
    for (const t of counts) gflops[t] = Math.max(gflops[t] ?? 0, native.fmaPeak(t, ms));
  const below_linear = counts.filter((t) => gflops[t]! < 0.75 * t * gflops[1]!);
  return { gflops, below_linear };
}

/** A log line for {@link machinePeak}'s result, with a warning when a thread count stayed below linear scaling. */
export function peakLine(p: MachinePeak): string {
  const parts = Object.entries(p.gflops).map(([t, g]) => `${g.toFixed(1)} GFLOP/s on ${t} thread(s)`);
  const warn = p.below_linear.length
    ? ` — WARNING: ${p.below_linear.join(', ')} thread(s) below 75% of linear scaling; another process held a core, ` +
      `fractions of peak on them are overstated`
    : '';
  return `measured FMA peak: ${parts.join(', ')}${warn}`;
}
