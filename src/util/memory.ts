/** The process's memory use for the run log: what a step costs in RAM, and the most the run has needed so far. */

const MIB = 1024 * 1024;

/** Memory metrics of this process, in MiB. */
export interface MemoryMetrics {
  /** Resident set size now (MiB). */
  'mem/rss_mib': number;
  /** The largest resident set size since the process started (MiB): what the machine must have. */
  'mem/peak_rss_mib': number;
}

/**
 * Current and peak resident memory of the process (MiB, rounded to 0.1). The peak is the kernel's high-water mark
 * (`getrusage` maxrss, reported by Node in KiB), so it also counts allocations freed between two calls.
 */
export function memoryMetrics(): MemoryMetrics {
  const round = (mib: number): number => Math.round(mib * 10) / 10;
  const rss = process.memoryUsage.rss() / MIB;
  const peak = (process.resourceUsage().maxRSS * 1024) / MIB;
  // maxRSS is sampled by the kernel and rss by Node a moment later: never report a peak below the current value.
  return { 'mem/rss_mib': round(rss), 'mem/peak_rss_mib': round(Math.max(peak, rss)) };
}
