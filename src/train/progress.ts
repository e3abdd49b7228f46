/**
 * The console side of a training run: after every step one status line — step i/N, each agent's reward and accuracy,
 * generation and training tokens/s, memory, and an ETA from the measured step times — redrawn in place on a terminal,
 * printed as plain lines when the output is a pipe or a CI log; messages (checkpoints, validations, warnings) stay
 * above it. Within a step a live line shows the phase in progress (step-watch.ts): below the status line on a
 * terminal; otherwise as a plain line at most every plainPhaseSeconds(), so a log is not flooded.
 *
 * The in-place redraw is log-update's (sindresorhus/log-update: small, ESM, maintained): it erases exactly the rows
 * its previous frame took, wrapped rows included, which a bare carriage return gets wrong once the line is wider than
 * the terminal, and `persist` prints a lasting line above the live one. cli-progress, the other candidate, draws a
 * bar with its own wall-clock ETA and templates: more than one status line needs, and its ETA is not ours.
 */
import { performance } from 'node:perf_hooks';
import { createLogUpdate } from 'log-update';
import { mean } from '../util/stats.js';

/** Where the display writes: process.stdout, or anything with `write` (a test's fake terminal). */
export interface ProgressStream {
  write(text: string): unknown;
  /** True on a terminal: then the status line is redrawn in place. */
  isTTY?: boolean;
  /** Terminal width in characters (log-update wraps to it; 80 when absent). */
  columns?: number;
  /** Terminal height in rows (24 when absent). */
  rows?: number;
}

/** A terminal the status line can be redrawn on: a pseudo-terminal of size 0 × 0 (some CI runners) would show nothing. */
function redrawable(out: ProgressStream): boolean {
  return out.isTTY === true && (out.columns ?? 80) > 0 && (out.rows ?? 24) > 0;
}

/** One agent's numbers in the status line. */
export interface AgentProgress {
  name: string;
  /** Mean total reward of the step's rollouts. */
  reward: number;
  /** Fraction of the step's rollouts judged correct. */
  accuracy: number;
  /** HACPO's capability estimate, when there is one. */
  pHat?: number;
  /** exchange.mode async: each partner's newest published step when this step was decided; default none. */
  partners?: Record<string, number>;
}

/** What the status line shows after a step. */
export interface StepProgress {
  /** Steps done (1-based). */
  step: number;
  /** Steps of the run. */
  total: number;
  agents: AgentProgress[];
  /** Response tokens generated per second of sampling in this step, all agents together. */
  generateTokensPerS: number;
  /** Tokens (prompts and responses) trained on per second of the updates in this step, all agents together. */
  trainTokensPerS: number;
  /** Wall-clock seconds this step took (rollouts, updates, validation): what the ETA is estimated from. */
  seconds: number;
  /** Resident memory of the process (MiB), when known. */
  rssMiB?: number;
}

/** The run's console output. */
export interface ProgressDisplay {
  /** Shows the state after a step: redrawn in place on a terminal, one plain line otherwise. */
  step(p: StepProgress): void;
  /** The live line of the phase in progress: below the status line on a terminal, else rate-limited plain lines. */
  phase(line: string): void;
  /** A line that stays (checkpoint, validation, warning), printed above the status line. */
  message(line: string): void;
  /** Leaves the last status line on screen; call once at the end. */
  done(): void;
}

/** Seconds as `42s`, `3m07s` or `2h05m`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const two = (n: number): string => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
}

/** Seconds left: the mean of the measured step times times the steps remaining (NaN before any step). */
export function etaSeconds(stepSeconds: readonly number[], remaining: number): number {
  if (stepSeconds.length === 0) return NaN;
  return mean(stepSeconds) * remaining;
}

/** The status line, e.g. `step 3/20  a reward 0.281 acc 75.0%  gen 812 tok/s  train 2210 tok/s  96 MiB  ETA 1m15s`. */
export function progressLine(p: StepProgress, eta: number): string {
  const agents = p.agents.map(
    (a) =>
      `${a.name} reward ${a.reward.toFixed(3)} acc ${(100 * a.accuracy).toFixed(1)}%` +
      (a.pHat === undefined ? '' : ` P̂ ${a.pHat.toFixed(3)}`) +
      Object.entries(a.partners ?? {})
        .map(([name, step]) => ` ${name}@${step}`)
        .join(''),
  );
  const memory = p.rssMiB === undefined ? [] : [`${Math.round(p.rssMiB)} MiB`];
  return [
    `step ${p.step}/${p.total}`,
    ...agents,
    `gen ${Math.round(p.generateTokensPerS)} tok/s`,
    `train ${Math.round(p.trainTokensPerS)} tok/s`,
    ...memory,
    `ETA ${formatDuration(eta)}`,
  ].join('  ');
}

/**
 * The least seconds between two plain phase lines (and before the first, so a log gets none from short steps):
 * HACRL_PROGRESS_SECONDS, default 10.
 */
export function plainPhaseSeconds(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.HACRL_PROGRESS_SECONDS;
  if (v === undefined || v === '') return 10;
  const s = Number(v);
  if (!(s >= 0)) throw new Error(`HACRL_PROGRESS_SECONDS must be a number of seconds ≥ 0, got "${v}"`);
  return s;
}

/**
 * A display writing to `out`: a live status line when `out` is a terminal with a size, plain lines otherwise (and when
 * `out` is a function, which receives each line).
 */
export function createProgressDisplay(
  out: ProgressStream | ((line: string) => void),
  o: {
    /** The clock of the phase lines' limits, in milliseconds; default performance.now. */
    now?: () => number;
    /** Least seconds between plain phase lines; default plainPhaseSeconds(). */
    plainSeconds?: number;
  } = {},
): ProgressDisplay {
  const now = o.now ?? (() => performance.now());
  const plainSeconds = o.plainSeconds ?? plainPhaseSeconds();
  const times: number[] = [];
  const lineOf = (p: StepProgress): string => {
    times.push(p.seconds);
    return progressLine(p, etaSeconds(times, p.total - p.step));
  };
  if (typeof out === 'function' || !redrawable(out)) {
    const write = typeof out === 'function' ? out : (line: string) => void out.write(`${line}\n`);
    let last = now();
    const print = (line: string): void => {
      last = now();
      write(line);
    };
    return {
      step: (p) => print(lineOf(p)),
      phase: (line) => void (now() - last >= plainSeconds * 1e3 && print(line)),
      message: print,
      done: () => {},
    };
  }
  // showCursor: a run stopped by an error or ^C must not leave the terminal without a cursor.
  const live = createLogUpdate(out as NodeJS.WriteStream, { showCursor: true });
  let current: string | null = null;
  let phase: string | null = null;
  const draw = (): void => live([current, phase].filter((l) => l !== null).join('\n'));
  return {
    step(p) {
      current = lineOf(p);
      phase = null;
      draw();
    },
    phase(line) {
      phase = line;
      draw();
    },
    message(line) {
      live.persist(line);
      if (current !== null || phase !== null) draw();
    },
    done() {
      phase = null;
      if (current !== null) draw();
      live.done();
      current = null;
    },
  };
}
