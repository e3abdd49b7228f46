/** How busy the machine's cores are, from /proc (Linux); null elsewhere. */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** CPU ticks of the whole machine (busy, and all) and of this process with its reaped children, from /proc. */
export interface CpuTicks {
  busy: number;
  total: number;
  own: number;
}

/** utime + stime + cutime + cstime of process `pid` ('self': this one), from /proc/PID/stat. */
function processTicks(pid: number | 'self'): number {
  // After the command name (which may hold spaces) come the state and, from field 14, utime stime cutime cstime.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat
    .slice(stat.lastIndexOf(') ') + 2)
    .split(' ')
    .slice(11, 15)
    .map(Number)
    .reduce((a, b) => a + b, 0);
}

/**
 * The machine's and this process's CPU ticks now, or null where /proc cannot be read. `alsoOwn`: processes whose
 * ticks count as this one's (a server the benchmark started), so they are not taken for background load.
 */
export function cpuTicks(alsoOwn: readonly number[] = []): CpuTicks | null {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const own = [processTicks('self'), ...alsoOwn.map(processTicks)].reduce((a, b) => a + b, 0);
    const total = cpu.reduce((a, b) => a + b, 0);
    return { busy: total - cpu[3]! - (cpu[4] ?? 0), total, own };
  } catch {
    return null;
  }
}

/**
 * Cores kept busy by other processes (or stolen by the hypervisor) between two readings, to 2 decimals: on a shared
 * 2-core machine a second thread that has to wait for a busy core makes every 2-thread number meaningless.
 */
export function backgroundCores(from: CpuTicks | null, to: CpuTicks | null): number | null {
  if (!from || !to || to.total <= from.total) return null;
  const elapsed = (to.total - from.total) / cpus().length;
  return Number((Math.max(0, to.busy - from.busy - (to.own - from.own)) / elapsed).toFixed(2));
}
