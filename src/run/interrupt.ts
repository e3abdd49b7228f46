/**
 * Stopping a run cleanly. The first SIGINT or SIGTERM only asks the training loop to stop: it finishes the update in
 * progress, writes a checkpoint and ends with an Interrupted error that says how to resume. A second signal ends the
 * process at once (the newest complete checkpoint is still intact, as after a crash).
 */
import { constants } from 'node:os';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
type StopSignal = (typeof SIGNALS)[number];

/** The exit status of a process ended by `signal`, by the shell's convention (128 + signal number: 130, 143). */
export function signalExitCode(signal: StopSignal): number {
  return 128 + constants.signals[signal];
}

/** A request to stop, set by the first SIGINT/SIGTERM once `install`ed; the loop polls `requested` between steps. */
export class StopRequest {
  /** The signal that asked for the stop, or null while none has. */
  signal: StopSignal | null = null;
  private readonly handler = (signal: StopSignal): void => this.onSignal(signal);

  private readonly notify: (line: string) => void;
  private readonly exit: (code: number) => void;
  private readonly resumeHint: string;

  constructor(
    opts: {
      /** How to resume, for the final message; default "Resume with --resume.". */
      resumeHint?: string;
      /** Where the notices go; default standard error. */
      notify?: (line: string) => void;
      /** Ends the process at the second signal; default process.exit. */
      exit?: (code: number) => void;
    } = {},
  ) {
    this.resumeHint = opts.resumeHint ?? 'Resume with --resume.';
    this.notify = opts.notify ?? ((line) => process.stderr.write(`${line}\n`));
    this.exit = opts.exit ?? ((code) => process.exit(code));
  }

  /** True once a stop was asked for. */
  get requested(): boolean {
    return this.signal !== null;
  }

  /** Starts listening for SIGINT and SIGTERM (replacing Node's default of dying at once). */
  install(): this {
    for (const s of SIGNALS) process.on(s, this.handler);
    return this;
  }

  /** Stops listening; Node's defaults apply again. */
  dispose(): void {
    for (const s of SIGNALS) process.off(s, this.handler);
  }

  /** The error a loop throws after stopping on request at `step` with its checkpoint in `checkpointDir`. */
  interrupted(step: number, checkpointDir: string): Interrupted {
    return new Interrupted(this.signal ?? 'SIGINT', step, checkpointDir, this.resumeHint);
  }

  private onSignal(signal: StopSignal): void {
    if (this.signal === null) {
      this.signal = signal;
      this.notify(
        `hacrl: ${signal} received: finishing the current step, then writing a checkpoint ` +
          `(send it again to stop at once, losing the steps since the last checkpoint)`,
      );
      return;
    }
    this.notify(`hacrl: ${signal} received again: stopping now; the newest complete checkpoint is intact`);
    this.exit(signalExitCode(signal));
  }
}

/** Thrown by a training loop that stopped on request after writing its checkpoint; carries the exit status. */
export class Interrupted extends Error {
  override name = 'Interrupted';
  /** The process exit status to use (130 for SIGINT, 143 for SIGTERM). */
  readonly exitCode: number;

  constructor(signal: StopSignal, step: number, checkpointDir: string, resumeHint: string) {
    super(`stopped by ${signal} after step ${step}; checkpoint written to ${checkpointDir}. ${resumeHint}`);
    this.exitCode = signalExitCode(signal);
  }
}

/** The command that resumes the run started by `argv` (the arguments after `node main.js`), as one shell line. */
export function resumeCommand(argv: readonly string[]): string {
  const quote = (a: string): string => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  const args = argv.includes('--resume') ? argv : [...argv, '--resume'];
  return `hacrl ${args.map(quote).join(' ')}`;
}
