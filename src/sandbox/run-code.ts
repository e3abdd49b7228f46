/**
 * Runs model-written JavaScript in a separate Node process (never in the trainer's process or its threads), with
 * Node's permission model (file reads and writes only inside a fresh scratch folder; no child processes, no worker
 * threads, no native addons), a V8 heap limit, prlimit limits (address space, file size, no core dumps),
 * an empty network namespace where the machine allows one, a wall-time limit and bounded output. See docs/sandbox.md.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { z } from 'zod';
import { probeIsolation } from './isolation.js';

/** Sandbox limits. */
export const SandboxLimitsSchema = z
  .object({
    /** Wall time before the process group is killed, in ms; default 3000. */
    timeoutMs: z
      .number()
      .int()
      .positive()
      .default(3000)
      .describe('Wall time before the process group is killed, in ms; default 3000'),
    /** V8 old-space heap limit, in MiB; default 64. */
    heapMb: z.number().int().min(8).default(64).describe('V8 old-space heap limit, in MiB; default 64'),
    /** Address-space limit (RLIMIT_AS) in MiB; Node itself needs about 1 GiB (checked on first use); default 1536. */
    addressSpaceMb: z
      .number()
      .int()
      .min(64)
      .default(1536)
      .describe('Address-space limit (RLIMIT_AS) in MiB; Node itself needs about 1 GiB; default 1536'),
    /** Bytes of stdout (and, separately, of stderr) kept before the process is killed; default 16384. */
    maxOutputBytes: z
      .number()
      .int()
      .positive()
      .default(16384)
      .describe('Bytes of stdout (and of stderr) kept before the process is killed; default 16384'),
    /** Largest file the program may write in its scratch folder (RLIMIT_FSIZE), in bytes; default 1 MiB. */
    maxFileBytes: z
      .number()
      .int()
      .positive()
      .default(1 << 20)
      .describe('Largest file the program may write in its scratch folder, in bytes; default 1048576'),
  })
  .strict()
  .describe('Limits of the sandbox running tool code');
/** Sandbox limits with defaults filled in. */
export type SandboxLimits = z.output<typeof SandboxLimitsSchema>;

/**
 * How a run ended: 'ok' (exit 0), 'error' (an exception or a non-zero exit), 'timeout' (wall time), 'memory' (heap or
 * address-space limit), 'output-limit' (too much stdout/stderr, or a file over maxFileBytes), 'denied' (access
 * outside the scratch folder, a child process or a worker: refused by the permission model).
 */
export type SandboxOutcome = 'ok' | 'error' | 'timeout' | 'memory' | 'output-limit' | 'denied';

/** All outcomes, for metrics that count each. */
export const SANDBOX_OUTCOMES: readonly SandboxOutcome[] = [
  'ok',
  'error',
  'timeout',
  'memory',
  'output-limit',
  'denied',
];

/** The result of one sandboxed run. */
export interface SandboxResult {
  outcome: SandboxOutcome;
  /** Standard output, at most maxOutputBytes. */
  stdout: string;
  /** Standard error, at most maxOutputBytes. */
  stderr: string;
  /** Exit code, or null when killed by a signal. */
  exitCode: number | null;
  /** The signal that ended the process, or null. */
  signal: string | null;
  /** Wall time of the run in ms (informational only: nothing downstream depends on it). */
  wallMs: number;
  /** What isolated this run: 'namespace' (no network at all) or 'none' (network reachable: see docs/sandbox.md). */
  network: 'namespace' | 'none';
}

const MEMORY_PATTERNS =
  /heap out of memory|Reached heap limit|Array buffer allocation failed|bad_alloc|Fatal process OOM|Invalid array length|Invalid string length|Allocation failed/;
const DENIED_PATTERNS = /ERR_ACCESS_DENIED|Access to this API has been restricted/;
const FILE_LIMIT_PATTERNS = /EFBIG|File too large/;

/** The argv of the sandboxed process for a script in `scratch`. */
function command(scratch: string, script: string, limits: SandboxLimits): string[] {
  const iso = probeIsolation();
  const node = [
    process.execPath,
    '--experimental-permission',
    `--allow-fs-read=${scratch}/`,
    `--allow-fs-write=${scratch}/`,
    `--max-old-space-size=${limits.heapMb}`,
    // One V8 worker thread: its stacks count against RLIMIT_AS, and their number otherwise grows with the cores.
    '--v8-pool-size=1',
    '--no-warnings',
    script,
  ];
  const mib = 1024 * 1024;
  const rlimits = iso.prlimit
    ? [
        'prlimit',
        `--as=${limits.addressSpaceMb * mib}`,
        `--fsize=${limits.maxFileBytes}`,
        // No --nproc: RLIMIT_NPROC counts every thread of the user (the trainer's too) and root ignores it; child
        // processes and workers are refused by the permission model instead.
        '--core=0',
        '--',
      ]
    : [];
  return [...(iso.networkPrefix ?? []), ...rlimits, ...node];
}

/**
 * Runs `code` (a CommonJS script) in the sandbox and reports how it ended; never throws for anything the code does.
 * Throws when the sandbox cannot run even an empty program under these limits (the first run per set of limits
 * checks), so a machine where every tool call would fail is reported instead of scored as failures silently.
 */
export async function runSandboxed(code: string, limitsInput: Partial<SandboxLimits> = {}): Promise<SandboxResult> {
  const limits = SandboxLimitsSchema.parse(limitsInput);
  await selfCheck(limits);
  return runUnchecked(code, limits);
}

const checked = new Map<string, Promise<void>>();

/** Runs `console.log(1)` once per set of limits; throws with the outcome when it does not come back. */
function selfCheck(limits: SandboxLimits): Promise<void> {
  const key = JSON.stringify(limits);
  let done = checked.get(key);
  if (!done) {
    // The check gets a long wall time: it must fail only when the limits make Node itself unable to run.
    done = runUnchecked('console.log(1)', { ...limits, timeoutMs: Math.max(limits.timeoutMs, 60_000) }).then((r) => {
      if (r.outcome !== 'ok' || r.stdout !== '1\n')
        throw new Error(
          `sandbox: an empty program ends as '${r.outcome}' under ${key} (stderr: ${r.stderr.slice(0, 300)}); ` +
            'raise addressSpaceMb or heapMb, or check that prlimit and node run here',
        );
    });
    checked.set(key, done);
  }
  return done;
}

/**
 * At most one sandboxed process per core at a time. A rollout acts for a whole batch at once, and 52 programs started
 * together on 2 cores took up to 1.7 s of wall time each (60 ms alone), so under any other load the wall-time limit
 * would fail programs that finish when run alone, and the outcome of an episode would depend on the machine's load.
 */
const slots = pLimit(availableParallelism());

/** One sandboxed run without the self-check; waits for a free slot, and the wall time counts from the spawn. */
function runUnchecked(code: string, limits: SandboxLimits): Promise<SandboxResult> {
  return slots(() => runInScratch(code, limits));
}

/** Writes `code` into a fresh scratch folder, runs it there and removes the folder. */
async function runInScratch(code: string, limits: SandboxLimits): Promise<SandboxResult> {
  const scratch = await mkdtemp(join(tmpdir(), 'hacrl-sandbox-'));
  try {
    const script = join(scratch, 'main.cjs');
    await writeFile(script, code);
    return await runProcess(command(scratch, script, limits), scratch, limits);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Spawns argv in its own process group, enforcing the time and output limits, and classifies the ending. */
function runProcess(argv: string[], cwd: string, limits: SandboxLimits): Promise<SandboxResult> {
  const started = Date.now();
  const network = probeIsolation().networkPrefix ? 'namespace' : 'none';
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
    });
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
    child.stdout.on('data', collect('stdout'));
    child.stderr.on('data', collect('stderr'));
    const timer = setTimeout(() => kill('timeout'), limits.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`sandbox: could not start ${argv[0]}: ${e.message}`));
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      const outcome = forced ?? classify(exitCode, signal, out.stderr);
      resolve({ outcome, ...out, exitCode, signal, wallMs: Date.now() - started, network });
    });
  });
}

/** The outcome of a process that ended by itself. */
function classify(exitCode: number | null, signal: string | null, stderr: string): SandboxOutcome {
  if (exitCode === 0) return 'ok';
  if (DENIED_PATTERNS.test(stderr)) return 'denied';
  if (MEMORY_PATTERNS.test(stderr)) return 'memory';
  if (signal === 'SIGXFSZ' || FILE_LIMIT_PATTERNS.test(stderr)) return 'output-limit';
  return 'error';
}
