/**
 * Which operating-system tools this machine offers for isolating a child process, probed once: `prlimit` (util-linux)
 * for resource limits, `unshare -n` (root) or `unshare -rn` (unprivileged user namespaces) for an empty network
 * namespace. The sandbox states in every result what it could use, so a weaker guarantee is never silent.
 */
import { spawnSync } from 'node:child_process';

/** What the sandbox can use here. */
export interface Isolation {
  /** The command prefix giving the child an empty network namespace, or null when neither form of unshare works. */
  networkPrefix: string[] | null;
  /** True when prlimit exists (address space and file size limits); otherwise only V8's heap limit holds. */
  prlimit: boolean;
}

let probed: Isolation | null = null;

/** True when `cmd args…` runs and exits 0. */
function works(cmd: string, args: string[]): boolean {
  const r = spawnSync(cmd, args, { stdio: 'ignore', timeout: 5000 });
  return r.status === 0;
}

/** The isolation tools available on this machine (probed on first call, then cached). */
export function probeIsolation(): Isolation {
  if (probed) return probed;
  const networkPrefix = works('unshare', ['-n', 'true'])
    ? ['unshare', '-n']
    : works('unshare', ['-rn', 'true'])
      ? ['unshare', '-rn']
      : null;
  probed = { networkPrefix, prlimit: works('prlimit', ['--as=1073741824', 'true']) };
  return probed;
}
