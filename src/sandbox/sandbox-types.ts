/**
 * What a sandboxed run gives back, shared by the launcher that runs it and run-code.ts that asks for it (run-code.ts
 * re-exports it: importers keep one sandbox module).
 */

/**
 * How a run ended: 'ok' (exit 0), 'error' (an exception or a non-zero exit), 'timeout' (wall time), 'memory' (heap or
 * address-space limit), 'output-limit' (too much stdout/stderr, or a file over maxFileBytes), 'denied' (refused by
 * the sandbox and not caught: access outside the scratch folder, a child process, a worker, a native addon,
 * WebAssembly memory, a signal to a process outside the sandbox, a socket or network connection, a full scratch
 * folder).
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
  /** Exit code (128 + N when the program was killed by signal N inside the sandbox), or null when killed from outside. */
  exitCode: number | null;
  /** The signal that ended the program, or null. */
  signal: string | null;
  /** Wall time of the run in ms (informational only: nothing downstream depends on it). */
  wallMs: number;
}
