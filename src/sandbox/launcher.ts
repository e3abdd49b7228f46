/**
 * The small process that starts sandboxed programs, and the trainer's side of it. Starting a process from the trainer
 * forks the trainer: the kernel copies its page tables and write-protects all of its memory until the child execs, so
 * every later write to each page faults. With a trainer holding 1.5 GB that cost 264 ms of kernel time per sandboxed
 * run (393 000 page faults; a program alone takes 46 ms), a third of a Sokoban bench's CPU. The launcher, a Node
 * process started once and holding a few MB, forks cheaply; the trainer sends it each run over IPC.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { SOURCE_FD } from './isolation.js';
import type { SandboxOutcome, SandboxResult } from './sandbox-types.js';

/**
 * The limits the launcher enforces itself, as SandboxLimits (run-code.ts) names them; the others are in the command's
 * isolation layers.
 */
interface RunLimits {
  /** Wall time before the program is killed, in ms. */
  timeoutMs: number;
  /** Bytes of stdout (and, separately, of stderr) kept before the process is killed. */
  maxOutputBytes: number;
}
/** One run asked of the launcher. */
interface Request {
  id: number;
  argv: string[];
  code: string;
  limits: RunLimits;
}
/** The launcher's answer: the result, or why the command could not start. */
type Reply = { id: number; result: SandboxResult } | { id: number; error: string };

/** Process groups of the runs under way in the launcher, killed when the trainer goes. */
const live = new Set<number>();

/** The argument that makes this module, started with an IPC channel, the launcher (a path test breaks on symlinks). */
const SERVE = '--hacrl-sandbox-launcher';

const MEMORY_PATTERNS =
  /heap out of memory|Reached heap limit|Array buffer allocation failed|bad_alloc|Fatal process OOM|Invalid array length|Invalid string length|Allocation failed/;
/**
 * Errors of what the sandbox refuses: the permission model (files, processes, workers, addons), WebAssembly memory
 * (its reservation exceeds RLIMIT_AS), signals to PIDs outside the PID namespace, sockets and hosts outside the
 * network and mount namespaces, and a full scratch tmpfs.
 */
const DENIED_PATTERNS =
  /ERR_ACCESS_DENIED|Access to this API has been restricted|ERR_DLOPEN_DISABLED|WebAssembly\.Memory\(\): could not allocate|\bkill (ESRCH|EPERM)\b|\b(connect|getaddrinfo|bind|listen|send|sendto) (ENOENT|EACCES|EPERM|ENETUNREACH|ECONNREFUSED|EADDRNOTAVAIL|EAI_AGAIN|ENOTFOUND)\b|\bENOSPC\b|\bEDQUOT\b/;
const FILE_LIMIT_PATTERNS = /EFBIG|File too large/;

/**
 * Spawns argv in its own process group with the source on fd SOURCE_FD, enforcing the time and output limits, and
 * classifies the ending. Killing the outer process (bubblewrap) kills the whole PID namespace and frees its scratch.
 */
function runProcess(argv: string[], code: string, limits: RunLimits): Promise<SandboxResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
    });
    if (child.pid !== undefined) live.add(child.pid);
    const source = child.stdio[SOURCE_FD] as Writable;
    // bubblewrap may exit before reading the source (its own errors then end the run as 'error').
    source.on('error', () => undefined);
    source.end(code);
    let forced: SandboxOutcome | null = null;
    const kill = (why: SandboxOutcome): void => {
      if (forced === null) forced = why;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const out = { stdout: '', stderr: '' };
    const collect = (name: 'stdout' | 'stderr') => (chunk: Buffer) => {
      const room = limits.maxOutputBytes - Buffer.byteLength(out[name]);
      out[name] += chunk.subarray(0, Math.max(0, room)).toString();
      if (chunk.length > room) kill('output-limit');
    };
    child.stdout!.on('data', collect('stdout'));
    child.stderr!.on('data', collect('stderr'));
    const timer = setTimeout(() => kill('timeout'), limits.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`could not start ${argv[0]}: ${e.message}`));
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      if (child.pid !== undefined) live.delete(child.pid);
      // bubblewrap reports a program killed by signal N as its own exit status 128 + N.
      const programSignal =
        signal ??
        (exitCode !== null && exitCode > 128
          ? (Object.entries(constants.signals).find(([, n]) => n === exitCode - 128)?.[0] ?? null)
          : null);
      const outcome = forced ?? classify(exitCode, programSignal, out.stderr);
      resolve({ outcome, ...out, exitCode, signal: programSignal, wallMs: Date.now() - started });
    });
  });
}

/** The outcome of a process that ended by itself. */
function classify(exitCode: number | null, signal: string | null, stderr: string): SandboxOutcome {
  if (exitCode === 0) return 'ok';
  // The CPU-time backstop (RLIMIT_CPU).
  if (signal === 'SIGXCPU') return 'timeout';
  if (DENIED_PATTERNS.test(stderr)) return 'denied';
  if (MEMORY_PATTERNS.test(stderr)) return 'memory';
  if (signal === 'SIGXFSZ' || FILE_LIMIT_PATTERNS.test(stderr)) return 'output-limit';
  return 'error';
}

/** The launcher's loop: runs each request and answers it; when the trainer's channel closes, kills its runs and exits. */
function serve(): void {
  process.on('message', (m: Request) => {
    runProcess(m.argv, m.code, m.limits).then(
      (result) => process.send!({ id: m.id, result } satisfies Reply),
      (e: Error) => process.send!({ id: m.id, error: e.message } satisfies Reply),
    );
  });
  process.on('disconnect', () => {
    for (const pid of live) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    process.exit(0);
  });
}

/** The running launcher with its unanswered requests, or null before the first run and after it ended. */
let launcher: { child: ChildProcess; pending: Map<number, (reply: Reply) => void> } | null = null;
let nextId = 0;

/** Whether the launcher (its process, whose exit fails the pending runs, and its channel) keeps the event loop alive. */
function hold(child: ChildProcess, on: boolean): void {
  if (on) {
    child.ref();
    child.channel?.ref();
  } else {
    child.unref();
    child.channel?.unref();
  }
}

/** Starts the launcher; it keeps the trainer's event loop alive only while a request is unanswered. */
function start(): NonNullable<typeof launcher> {
  const child = fork(fileURLToPath(import.meta.url), [SERVE], {
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // Its own process group: a Ctrl-C meant for the trainer (which then finishes its step) must not end the runs.
    detached: true,
  });
  const started = { child, pending: new Map<number, (reply: Reply) => void>() };
  child.on('message', (reply: Reply) => {
    started.pending.get(reply.id)?.(reply);
    started.pending.delete(reply.id);
    if (started.pending.size === 0) hold(child, false);
  });
  const fail = (why: string): void => {
    if (launcher === started) launcher = null;
    for (const [id, answer] of started.pending) answer({ id, error: `the launcher process ${why}` });
    started.pending.clear();
  };
  child.on('error', (e) => fail(`failed: ${e.message}`));
  child.on('exit', (code, signal) => fail(`ended (${signal ?? `exit ${code}`})`));
  hold(child, false);
  return started;
}

/**
 * Runs argv (the isolation layers and node) with `code` on fd SOURCE_FD in the launcher and reports how it ended.
 * Rejects when the command cannot start or the launcher dies; the next run then starts a new launcher.
 */
export function runInLauncher(argv: string[], code: string, limits: RunLimits): Promise<SandboxResult> {
  launcher ??= start();
  const { child, pending } = launcher;
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, (reply) =>
      'result' in reply ? resolve(reply.result) : reject(new Error(`sandbox: ${reply.error}`)),
    );
    hold(child, true);
    const request: Request = {
      id,
      argv,
      code,
      limits: { timeoutMs: limits.timeoutMs, maxOutputBytes: limits.maxOutputBytes },
    };
    child.send(request, (e) => {
      if (e === null) return;
      pending.delete(id);
      reject(new Error(`sandbox: the launcher process took no request (${e.message})`));
    });
  });
}

if (process.argv[2] === SERVE && process.send !== undefined) serve();
