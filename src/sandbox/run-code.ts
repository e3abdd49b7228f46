/**
 * Runs model-written JavaScript in a separate Node process (never in the trainer's process or its threads): as an
 * unprivileged user in its own user, PID, network, IPC and mount namespaces, seeing only the system's libraries and a
 * size-limited scratch tmpfs; under Node's permission model (file access only inside the scratch folder; no child
 * processes, worker threads or native addons), a V8 heap limit, prlimit limits (address space, file size, CPU time,
 * no core dumps), a wall-time limit and bounded output; killed with its namespace when the trainer dies. See
 * docs/sandbox.md.
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { LRUCache } from 'lru-cache';
import pLimit from 'p-limit';
import { z } from 'zod';
import { SCRATCH, isolationPrefix } from './isolation.js';
import { runInLauncher } from './launcher.js';
import type { SandboxResult } from './sandbox-types.js';

const MIB = 1 << 20;

/** Sandbox limits; each has a stated bound, checked when a workflow config is read. */
export const SandboxLimitsSchema = z
  .object({
    /** Wall time before the program is killed, in ms; default 3000, at most 600000. */
    timeoutMs: z
      .number()
      .int()
      .positive()
      .max(600_000, 'sandbox.timeoutMs is at most 600000 (10 minutes): lower it')
      .default(3000)
      .describe('Wall time before the program is killed, in ms; default 3000, at most 600000'),
    /** V8 old-space heap limit, in MiB; default 64, at most 16384. */
    heapMb: z
      .number()
      .int()
      .min(8)
      .max(16384, 'sandbox.heapMb is at most 16384: lower it')
      .default(64)
      .describe('V8 old-space heap limit, in MiB; default 64, at most 16384'),
    /** Address-space limit (RLIMIT_AS) in MiB; Node itself needs about 1 GiB (checked on first use); default 1536. */
    addressSpaceMb: z
      .number()
      .int()
      .min(64)
      .max(65536, 'sandbox.addressSpaceMb is at most 65536: lower it')
      .default(1536)
      .describe('Address-space limit (RLIMIT_AS) in MiB; Node itself needs about 1 GiB; default 1536, at most 65536'),
    /** Bytes of stdout (and, separately, of stderr) kept before the process is killed; default 16384, at most 64 MiB. */
    maxOutputBytes: z
      .number()
      .int()
      .positive()
      .max(64 * MIB, 'sandbox.maxOutputBytes is at most 67108864 (64 MiB): lower it')
      .default(16384)
      .describe('Bytes of stdout (and of stderr) kept before the process is killed; default 16384, at most 64 MiB'),
    /** Largest file the program may write in its scratch folder (RLIMIT_FSIZE), in bytes; default 1 MiB, at most 1 GiB. */
    maxFileBytes: z
      .number()
      .int()
      .positive()
      .max(1024 * MIB, 'sandbox.maxFileBytes is at most 1073741824 (1 GiB): lower it')
      .default(MIB)
      .describe('Largest file the program may write in its scratch folder, in bytes; default 1048576, at most 1 GiB'),
    /** Total size of the scratch folder (a tmpfs, in memory), source included, in bytes; default 8 MiB, 64 KiB to 1 GiB. */
    scratchBytes: z
      .number()
      .int()
      .min(64 * 1024, 'sandbox.scratchBytes is at least 65536 (the program itself lives there): raise it')
      .max(1024 * MIB, 'sandbox.scratchBytes is at most 1073741824 (1 GiB; it is held in memory): lower it')
      .default(8 * MIB)
      .describe(
        'Total size of the scratch folder (in memory), source included, in bytes; default 8 MiB, at most 1 GiB',
      ),
    /**
     * Whether a program whose text and limits equal an earlier one's gets that run's result instead of a run of its
     * own; default true. Off only for tool programs meant to differ run to run (randomness, clocks).
     */
    reuseResults: z
      .boolean()
      .default(true)
      .describe(
        "Whether a program equal (text and limits) to an earlier one's gets that result instead of a new run; default true",
      ),
  })
  .strict()
  .describe('Limits of the sandbox running tool code, and whether equal programs share a run');
/** Sandbox limits with defaults filled in. */
export type SandboxLimits = z.output<typeof SandboxLimitsSchema>;

/** The argv of the sandboxed process: the isolation layers, then node under its permission model. */
function command(limits: SandboxLimits): string[] {
  const prefix = isolationPrefix({
    addressSpaceBytes: limits.addressSpaceMb * MIB,
    fileBytes: limits.maxFileBytes,
    cpuSeconds: Math.ceil(limits.timeoutMs / 1000) + 1,
    scratchBytes: limits.scratchBytes,
  });
  return [
    ...prefix,
    process.execPath,
    '--experimental-permission',
    `--allow-fs-read=${SCRATCH}/`,
    `--allow-fs-write=${SCRATCH}/`,
    `--max-old-space-size=${limits.heapMb}`,
    // One V8 worker thread: its stacks count against RLIMIT_AS, and their number otherwise grows with the cores.
    '--v8-pool-size=1',
    '--no-warnings',
    `${SCRATCH}/main.cjs`,
  ];
}

/**
 * Runs `code` (a CommonJS script) in the sandbox and reports how it ended; never throws for anything the code does.
 * Throws when the sandbox cannot run even an empty program under these limits (the first run per set of limits
 * checks), or when this machine lacks a layer of the isolation (naming it), so a machine where every tool call would
 * fail, or run less contained, is reported instead of scored as failures or run silently.
 */
export async function runSandboxed(code: string, limitsInput: Partial<SandboxLimits> = {}): Promise<SandboxResult> {
  const limits = SandboxLimitsSchema.parse(limitsInput);
  await selfCheck(limits);
  if (!limits.reuseResults) return runUnchecked(code, limits);
  const key = createHash('sha256').update(JSON.stringify(limits)).update('\0').update(code).digest('base64');
  return { ...(await results.fetch(key, { context: { code, limits } }))! };
}

/**
 * Results of programs already run, by a hash of their limits and text. A tree-sampled rollout asks for the same program
 * many times (in 6 steps of the Sokoban bench's AT-GRPO arm, 310 runs held 159 distinct programs), and each run is a
 * process start of about 40 ms of CPU. Equal requests made together share one run; a run that fails (the launcher
 * died) is not kept. Bounded by the bytes of the outputs held.
 */
const results = new LRUCache<string, SandboxResult, { code: string; limits: SandboxLimits }>({
  maxSize: 64 * MIB,
  sizeCalculation: (r, key) => key.length + r.stdout.length + r.stderr.length + 64,
  fetchMethod: (_key, _stale, { context }) => runUnchecked(context.code, context.limits),
});

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
            'raise sandbox.addressSpaceMb or sandbox.heapMb, or check that prlimit, bwrap and node run here',
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
  return slots(() => runInLauncher(command(limits), code, limits));
}
