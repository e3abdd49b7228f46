/**
 * Stopping a run cleanly. The first SIGINT or SIGTERM is acknowledged at once and asks the training loop to stop at
 * its next safe point (a decode step, a mini-batch, a scoring pass): the step in progress is dropped, nothing more is
 * written, and the loop ends with an Interrupted error that names the newest checkpoint and how to resume (a stop
 * that arrives once the step's work is done checkpoints that step instead). A second signal ends the process at once;
 * the newest complete checkpoint is intact either way, as after a crash. The step computes synchronously, so the
 * signals are caught by the native addon's handler (native/signals.c), which writes the notices and ends the process
 * itself; without the addon, Node's listeners hear them only between steps.
 */
import { constants } from 'node:os';
import { nativeBackend } from '../backend/select.js';
import type { NativeExtras } from '../backend/native.js';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
type StopSignal = (typeof SIGNALS)[number];

/** The notices, after "hacrl: SIGNAL". */
const FIRST_NOTICE =
  ' received: stopping at the next safe point; the step in progress is dropped, and resuming continues from the ' +
  'newest checkpoint (send it again to stop at once)';
const AGAIN_NOTICE = ' received again: stopping now; the newest complete checkpoint is intact';

/** The exit status of a process ended by `signal`, by the shell's convention (128 + signal number: 130, 143). */
export function signalExitCode(signal: StopSignal): number {
  return 128 + constants.signals[signal];
}

/** Thrown at a safe point inside a step once a stop was asked for: the loop drops the step (StopRequest.poll). */
export class StopPoint extends Error {
  override name = 'StopPoint';
  constructor() {
    super('stop requested: the step in progress is dropped');
  }
}

/**
 * A request to stop, set by the first SIGINT/SIGTERM once `install`ed; the loop polls `requested` between steps and
 * `poll` at the safe points inside one.
 */
export class StopRequest {
  /** The signal that asked for the stop, or null while none has. */
  signal: StopSignal | null = null;
  private readonly handler = (signal: StopSignal): void => this.onSignal(signal);
  /** The addon watching the signals while installed (null without one: Node's listeners alone). */
  private native: NativeExtras | null = null;

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

  /** True once a stop was asked for (a subclass may ask for one at a step's end without a signal). */
  get requested(): boolean {
    return this.signalled;
  }

  /** True once a SIGINT or SIGTERM asked for a stop. */
  get signalled(): boolean {
    if (this.signal === null && this.native) {
      const n = this.native.pendingStopSignal();
      if (n !== 0) this.signal = n === constants.signals.SIGINT ? 'SIGINT' : 'SIGTERM';
    }
    return this.signal !== null;
  }

  /** A safe point inside a step: throws StopPoint once a signal asked for a stop (only a signal drops a step). */
  poll(): void {
    if (this.signalled) throw new StopPoint();
  }

  /**
   * Starts listening for SIGINT and SIGTERM (replacing Node's default of dying at once), through the native addon's
   * handler when it loads (`native`: default true), so that a signal is heard while a step computes.
   */
  install(o: { native?: boolean } = {}): this {
    for (const s of SIGNALS) process.on(s, this.handler);
    // After the listeners: the addon's handler chains to the one libuv installed for them.
    this.native = o.native === false ? null : nativeBackend();
    this.native?.watchStopSignals(`${FIRST_NOTICE}\n`, `${AGAIN_NOTICE}\n`);
    return this;
  }

  /** Stops listening; Node's defaults apply again. */
  dispose(): void {
    this.native?.unwatchStopSignals();
    this.native = null;
    for (const s of SIGNALS) process.off(s, this.handler);
  }

  /** The error a loop throws after stopping on request at `step` with its checkpoint in `checkpointDir`. */
  interrupted(step: number, checkpointDir: string): Interrupted {
    return new Interrupted(
      this.signal ?? 'SIGINT',
      `after step ${step}; checkpoint written to ${checkpointDir}. ${this.resumeHint}`,
    );
  }

  /**
   * The error a loop throws after dropping step `step` on request in `phase` (e.g. "sampling a"; null: none named),
   * `newest` being the run's newest checkpoint (its folder and step; null before the first).
   */
  dropped(step: number, phase: string | null, newest: { dir: string; step: number } | null): Interrupted {
    const where = newest
      ? `resuming continues from the newest checkpoint, ${newest.dir} (step ${newest.step}). ${this.resumeHint}`
      : 'no checkpoint was written yet, so there is nothing to resume: start the run again';
    const during = `during step ${step}${phase === null ? '' : ` (${phase})`}`;
    return new Interrupted(this.signal ?? 'SIGINT', `${during}, which was dropped; ${where}`);
  }

  private onSignal(signal: StopSignal): void {
    // The addon's handler has written the notice and counts the signals itself (a second one never gets here).
    if (this.native) {
      this.signal ??= signal;
      return;
    }
    if (this.signal === null) {
      this.signal = signal;
      this.notify(`hacrl: ${signal}${FIRST_NOTICE}`);
      return;
    }
    this.notify(`hacrl: ${signal}${AGAIN_NOTICE}`);
    this.exit(signalExitCode(signal));
  }
}

/** Thrown by a training loop that stopped on request; says what was kept and carries the exit status. */
export class Interrupted extends Error {
  override name = 'Interrupted';
  /** The process exit status to use (130 for SIGINT, 143 for SIGTERM). */
  readonly exitCode: number;

  /** `what`: where it stopped and what was kept, after "stopped by SIGNAL ". */
  constructor(signal: StopSignal, what: string) {
    super(`stopped by ${signal} ${what}`);
    this.exitCode = signalExitCode(signal);
  }
}

/** The command that resumes the run started by `argv` (the arguments after `node main.js`), as one shell line. */
export function resumeCommand(argv: readonly string[]): string {
  const quote = (a: string): string => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  const args = argv.includes('--resume') ? argv : [...argv, '--resume'];
  return `hacrl ${args.map(quote).join(' ')}`;
}
