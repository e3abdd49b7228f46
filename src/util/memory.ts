/** The process's memory use for the run log, and the machine's memory a run is planned against. */
import { readFileSync } from 'node:fs';
import { freemem, totalmem } from 'node:os';

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

/** The machine's memory as a run is checked against it, bytes. */
export interface MachineMemory {
  /** Physical memory (os.totalmem). */
  total: number;
  /** What a new process can take: /proc/meminfo MemAvailable (os.freemem where there is none), or the limit below. */
  available: number;
  /** Set when HACRL_MEMORY_LIMIT_BYTES gave `available` (a test's or a shared machine's budget). */
  limitFromEnv: boolean;
}

/**
 * The machine's total and available memory; HACRL_MEMORY_LIMIT_BYTES (a whole number of bytes in decimal digits)
 * replaces the available figure, for a budget below what the machine has free or for tests.
 */
export function machineMemory(env: NodeJS.ProcessEnv = process.env): MachineMemory {
  const total = totalmem();
  const limit = env.HACRL_MEMORY_LIMIT_BYTES;
  if (limit !== undefined && limit !== '') {
    // Digits only: Number() would also read 0x10 as 16 bytes, 1e9 as a billion and ' 5 ' as 5, each a likely mistake.
    const bytes = /^[0-9]+$/.test(limit) ? Number(limit) : NaN;
    if (!Number.isSafeInteger(bytes) || bytes < 1)
      throw new Error(
        `HACRL_MEMORY_LIMIT_BYTES must be a whole number of bytes in decimal digits (e.g. 8589934592 for 8 GiB), got "${limit}"`,
      );
    return { total, available: bytes, limitFromEnv: true };
  }
  let available = freemem();
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) available = Number(m[1]) * 1024;
  } catch {
    // no /proc (not Linux): the free figure stands
  }
  return { total, available, limitFromEnv: false };
}

/** The process's peak resident memory so far from /proc/self/status VmHWM (bytes); maxRSS where there is none. */
export function peakResidentBytes(): number {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // no /proc: getrusage's figure
  }
  return process.resourceUsage().maxRSS * 1024;
}
