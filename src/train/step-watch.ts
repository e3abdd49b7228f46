/**
 * A step's live progress and its safe points: the trainer and the sources name each phase as it starts (sampling,
 * scoring, training, validating, with its agent), the computations report at their safe points (util/work-points.ts),
 * and the watch turns that into one live line — sequences and tokens with tokens/s, or mini-batch i/M — with an ETA
 * from the first phase on; at every safe point it polls the stop request, which throws to drop the step.
 */
import { performance } from 'node:perf_hooks';
import type { StopRequest } from '../run/interrupt.js';
import type { WorkWatcher } from '../util/work-points.js';
import { mean } from '../util/stats.js';
import { etaSeconds, formatDuration, type ProgressDisplay } from './progress.js';

/** The phases of a step the live line names. */
export type PhaseName = 'sampling' | 'scoring' | 'training' | 'validating';

/** Starts a phase: its name, the agent it works for, and how many sequences (or mini-batches) it has to do (0: unknown). */
export type PhaseStart = (name: PhaseName, agent: string, items?: number) => void;

/** Milliseconds between two live lines within a phase at least (a phase's first line always shows). */
const LINE_MS = 100;

/** A count with thousands separators. */
const count = (n: number): string => n.toLocaleString('en-US');

/** The live progress of one run's steps (install it with watchWork while the run computes). */
export class StepWatch implements WorkWatcher {
  private step = 0;
  private stepStart = 0;
  private readonly stepSeconds: number[] = [];
  /** Seconds of this step's finished phases. */
  private phasesDone = 0;
  private phaseName: PhaseName | null = null;
  private agent = '';
  private items = 0;
  private itemsDone = 0;
  private tokens = 0;
  private phaseStart = 0;
  /** When the last line was shown (milliseconds). */
  private shown = -Infinity;
  /** Tokens trained on in this step (prompts and responses, every epoch). */
  trainTokens = 0;

  /**
   * `total`: the run's steps; `now`: the clock in milliseconds (default performance.now); `stop`: polled at every
   * safe point (default none).
   */
  constructor(
    private readonly display: ProgressDisplay,
    private readonly total: number,
    private readonly stop?: StopRequest,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Step `step` (0-based; -1: the base models' validation before the first) begins. */
  startStep(step: number): void {
    this.step = step;
    this.stepStart = this.now();
    this.phasesDone = 0;
    this.phaseName = null;
    this.trainTokens = 0;
  }

  /** The phase in progress and its agent, e.g. "sampling a"; null between phases. */
  get current(): string | null {
    return this.phaseName === null ? null : `${this.phaseName} ${this.agent}`;
  }

  /** The step ended after `seconds`: the ETA's measure from now on. */
  endStep(seconds: number): void {
    this.stepSeconds.push(seconds);
    this.phaseName = null;
  }

  /** Starts a phase (see PhaseStart); a safe point. */
  readonly phase: PhaseStart = (name, agent, items = 0) => {
    const t = this.now();
    if (this.phaseName !== null) this.phasesDone += (t - this.phaseStart) / 1e3;
    Object.assign(this, { phaseName: name, agent, items, itemsDone: 0, tokens: 0, phaseStart: t });
    this.stop?.poll();
    this.show(t);
  };

  generated(tokens: number): void {
    this.tokens += tokens;
    this.passed();
  }

  finished(sequences: number): void {
    this.itemsDone += sequences;
    this.passed();
  }

  updated(done: number, total: number, tokens: number): void {
    [this.itemsDone, this.items] = [done, total];
    this.tokens += tokens;
    this.trainTokens += tokens;
    this.passed();
  }

  passed(): void {
    this.stop?.poll();
    const t = this.now();
    // Safe points come every few milliseconds on a small model: a line more often than LINE_MS would only cost.
    if (this.phaseName !== null && t - this.shown >= LINE_MS) this.show(t);
  }

  private show(t: number): void {
    this.shown = t;
    this.display.phase(this.line());
  }

  /** The live line, e.g. `step 3/20  sampling a  64/128 sequences  3,210 tokens  218 tok/s  ETA 5m12s`. */
  private line(): string {
    const seconds = (this.now() - this.phaseStart) / 1e3;
    const rate = seconds > 0 ? `${Math.round(this.tokens / seconds)} tok/s` : '';
    const of = (what: string): string =>
      `${count(this.itemsDone)}${this.items > 0 ? `/${count(this.items)}` : ''} ${what}`;
    const detail =
      this.phaseName === 'training'
        ? this.items > 0
          ? [`mini-batch ${this.itemsDone}/${this.items}`, rate]
          : []
        : this.phaseName === 'scoring'
          ? []
          : [of('sequences'), `${count(this.tokens)} tokens`, rate];
    const where = this.step < 0 ? 'before step 1' : `step ${this.step + 1}/${this.total}`;
    const eta = this.step < 0 ? [] : [this.eta()];
    return [where, `${this.phaseName} ${this.agent}`, ...detail.filter((d) => d !== ''), ...eta].join('  ');
  }

  /**
   * `ETA …` from the mean measured step time once a step has ended; before that a lower bound (`ETA ≥ …`) from this
   * step's phases so far, the running one projected from its fraction done.
   */
  private eta(): string {
    const inStep = (this.now() - this.stepStart) / 1e3;
    const left = this.total - this.step - 1;
    if (this.stepSeconds.length > 0)
      return `ETA ${formatDuration(etaSeconds(this.stepSeconds, left) + Math.max(0, mean(this.stepSeconds) - inStep))}`;
    const phaseSeconds = (this.now() - this.phaseStart) / 1e3;
    const fraction = this.items > 0 ? this.itemsDone / this.items : 0;
    const projected = this.phasesDone + (fraction > 0 ? phaseSeconds / fraction : phaseSeconds);
    return `ETA ≥ ${formatDuration(projected * (left + 1) - inStep)}`;
  }
}
