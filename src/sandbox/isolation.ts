/**
 * The operating-system layers around a sandboxed program, probed once: `prlimit` (util-linux) for resource limits,
 * `setpriv` (util-linux) to drop from root to a dedicated unprivileged uid, and bubblewrap (`bwrap`) for new user, PID,
 * network, IPC, UTS and mount namespaces in which the program sees only the system's read-only `/usr` tree (its
 * libraries), a private `/proc` and `/dev`, and a size-limited tmpfs scratch folder that vanishes with the namespace.
 * When a layer is missing the sandbox refuses to start and says which one and how to get it: it never runs weaker.
 */
import { spawnSync } from 'node:child_process';
import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * The uid and gid that sandboxed programs run as when the trainer is root: owned by no user of a Debian system, so the
 * program owns no host file and can signal no host process. Non-root trainers run programs under their own uid,
 * mapped into a fresh user namespace.
 */
export const SANDBOX_UID = 2_000_000_000;

/** The program's scratch folder inside the sandbox (a tmpfs of `scratchBytes`; nothing of it exists on the host). */
export const SCRATCH = '/scratch';

/** The file descriptor of the child on which the program's source is passed (bubblewrap copies it into SCRATCH). */
export const SOURCE_FD = 3;

/** The resource limits the layers enforce for one run. */
export interface IsolationLimits {
  /** RLIMIT_AS, in bytes. */
  addressSpaceBytes: number;
  /** RLIMIT_FSIZE, in bytes. */
  fileBytes: number;
  /** RLIMIT_CPU soft limit in s (SIGXCPU; SIGKILL one second later): a backstop if the wall-time timer never fires. */
  cpuSeconds: number;
  /** Size of the scratch tmpfs, in bytes. */
  scratchBytes: number;
}

/** Top-level host paths the sandbox's root gets (read-only, or as the same symlink): the dynamic loader and libraries. */
const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** True when `cmd args…` exits 0; otherwise the first line of what it printed to stderr (or why it could not run). */
function attempt(cmd: string, args: string[]): true | string {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000, env: { PATH: envPath() } });
  if (r.status === 0) return true;
  if (r.error) return r.error.message;
  return r.stderr.toString().trim().split('\n')[0] || `exit ${r.status ?? r.signal}`;
}

/** The PATH the layers are looked up in (and the only variable the program sees). */
function envPath(): string {
  return process.env['PATH'] ?? '/usr/bin:/bin';
}

/** bubblewrap arguments giving the program the system's libraries read-only, and node's folder when outside them. */
function mounts(): string[] {
  const args: string[] = [];
  for (const path of SYSTEM_PATHS) {
    let isLink: boolean;
    try {
      isLink = lstatSync(path).isSymbolicLink();
    } catch {
      continue;
    }
    args.push(...(isLink ? ['--symlink', readlinkSync(path), path] : ['--ro-bind', path, path]));
  }
  const nodeDir = dirname(realpathSync(process.execPath));
  if (!SYSTEM_PATHS.some((p) => nodeDir === p || nodeDir.startsWith(`${p}/`))) args.push('--ro-bind', nodeDir, nodeDir);
  return args;
}

/** The layers this machine offers, or why it offers too few. */
type Probe = { ok: true; root: boolean; mounts: string[] } | { ok: false; reason: string };

let probed: Probe | null = null;

/** The user switch (root only) and bubblewrap's namespaces and mounts, without the scratch folder. */
function wrap(root: boolean, mountArgs: string[]): string[] {
  const user = root
    ? [
        'setpriv',
        `--reuid=${SANDBOX_UID}`,
        `--regid=${SANDBOX_UID}`,
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--no-new-privs',
        '--pdeathsig=KILL',
        '--',
      ]
    : [];
  return [
    ...user,
    'bwrap',
    '--unshare-user',
    '--unshare-pid',
    '--unshare-net',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    // Killed (SIGKILL, the whole PID namespace with it) when the process that started bwrap dies.
    '--die-with-parent',
    // A new session: the program cannot reach the trainer's terminal (TIOCSTI).
    '--new-session',
    '--cap-drop',
    'ALL',
    ...mountArgs,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
  ];
}

/** Probes each layer in turn, so a refusal names the first one missing. */
function probe(): Probe {
  const fix = 'the sandbox for model-written code refuses to run without it (docs/sandbox.md)';
  const prlimit = attempt('prlimit', ['--as=1073741824', '--core=0', '--', 'true']);
  if (prlimit !== true) return { ok: false, reason: `prlimit does not run (${prlimit}): install util-linux; ${fix}` };
  const bwrap = attempt('bwrap', ['--version']);
  if (bwrap !== true)
    return {
      ok: false,
      reason: `bubblewrap does not run (${bwrap}): install it (Debian: apt-get install bubblewrap; scripts/setup.sh does); ${fix}`,
    };
  const root = process.getuid?.() === 0;
  if (root) {
    const drop = attempt('setpriv', [`--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, '--clear-groups', 'true']);
    if (drop !== true)
      return { ok: false, reason: `setpriv cannot switch to uid ${SANDBOX_UID} (${drop}): install util-linux; ${fix}` };
  }
  let mountArgs: string[];
  try {
    mountArgs = mounts();
  } catch (e) {
    return { ok: false, reason: `cannot map the system folders into the sandbox (${(e as Error).message}); ${fix}` };
  }
  const argv = [...wrap(root, mountArgs), '--', process.execPath, '-e', ''];
  const ns = attempt(argv[0]!, argv.slice(1));
  if (ns !== true)
    return {
      ok: false,
      reason:
        `bubblewrap cannot create its namespaces${root ? ` as uid ${SANDBOX_UID}` : ''} or start node in them ` +
        `(${ns}): allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0, ` +
        `kernel.unprivileged_userns_clone=1, and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)` +
        `${root ? ` and make ${process.execPath} executable by every user` : ''}; ${fix}`,
    };
  return { ok: true, root, mounts: mountArgs };
}

/**
 * The command prefix that runs a program under every layer (limits, unprivileged user, namespaces, scratch tmpfs
 * holding the source read from fd SOURCE_FD, working directory SCRATCH, PATH its only environment variable). Throws, naming the missing layer and how to
 * get it, when this machine cannot give every guarantee of docs/sandbox.md.
 */
export function isolationPrefix(limits: IsolationLimits): string[] {
  probed ??= probe();
  if (!probed.ok) throw new Error(`sandbox: ${probed.reason}`);
  return [
    'prlimit',
    `--as=${limits.addressSpaceBytes}`,
    `--fsize=${limits.fileBytes}`,
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    // No --nproc: RLIMIT_NPROC counts every thread of the user; child processes and workers are refused by the
    // permission model, and the PID namespace keeps any process the program could make from the host's.
    '--core=0',
    '--',
    ...wrap(probed.root, probed.mounts),
    '--size',
    String(limits.scratchBytes),
    '--tmpfs',
    SCRATCH,
    '--file',
    String(SOURCE_FD),
    `${SCRATCH}/main.cjs`,
    '--chdir',
    SCRATCH,
    '--',
    // bubblewrap sets PWD after its own --unsetenv: env takes it out, so the program sees PATH alone.
    'env',
    '-u',
    'PWD',
    '--',
  ];
}
