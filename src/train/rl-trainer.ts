/**
 * The RLVR training loop for every algorithm, as a loop over a source and a team of learners: each step the source
 * fills one table of samples (sample-sources.ts, sample-table.ts), the rollout exchange may add other machines'
 * records to it, then every learner updates on its view (learner-step.ts) — a single-agent run is a team of one that
 * does not share, an AT-GRPO run's source plays a workflow. The step log (step-log.ts) writes metrics, samples,
 * validations and warnings; checkpoints are atomic and a resume continues bit for bit.
 */
import { performance } from 'node:perf_hooks';
import { engine } from '../backend/engine.js';
import type { Kernels } from '../backend/kernels.js';
import { parseSavedRunConfig } from '../config/load-config.js';
import type { RunConfig } from '../config/rl-config.js';
import { RunFolder } from '../run/run-folder.js';
import { lockRunDir } from '../run/run-lock.js';
import { StopPoint, type StopRequest } from '../run/interrupt.js';
import { loadNewestValidState, saveTrainState, type TrainState } from '../run/train-state.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { Rng } from '../util/rng.js';
import {
  buildLearners,
  initialState,
  partnerTokenizers,
  saveLearners,
  withEveryAgent,
  type IsLocal,
  type TeamMember,
} from './learners.js';
import { createProgressDisplay, type ProgressDisplay } from './progress.js';
import { resolveRun, type ResolvedRun } from './resolved-run.js';
import { precisionRefusal } from './run-plan.js';
import { runSource } from './run-source.js';
import type { SampleSource, StepMetrics } from './sample-sources.js';
import type { SampleRecord } from './sample-table.js';
import type { PartnerVersions } from './learner-step.js';
import { StepLog } from './step-log.js';
import { StepWatch } from './step-watch.js';
import { teamStep } from './team-step.js';
import { watchWork } from '../util/work-points.js';

/** A sink for the run's console lines: one status line per step, and checkpoints, validations and warnings. */
export type ProgressFn = (line: string) => void;

/**
 * Completes each step's table with the records of agents that other processes train (src/distributed). This process
 * samples, trains, validates, logs and checkpoints only its `local` agents; of the others it loads their tokenizers,
 * never their weights (learners.ts, Partner).
 */
export interface StepExchange {
  /** Names of the agents this process trains. */
  readonly local: ReadonlySet<string>;
  /**
   * Given this process's records of step `step` (from 1; ids from 0, in agent order) and their sampling metrics,
   * returns every agent's records in agent order, numbered as one process numbers them, and every agent's metrics;
   * an exchange whose partners' records come from other steps (exchange.mode: async) also says which version of
   * which partner generated each.
   */
  complete(
    step: number,
    table: SampleRecord[],
    sampled: Map<string, StepMetrics>,
  ): Promise<{ table: SampleRecord[]; sampled: Map<string, StepMetrics>; versions?: PartnerVersions }>;
  /** The step a run that joins others already under way starts after (0: from the start); default 0. */
  readonly startStep?: number;
}

/** Options of a training run. */
export interface TrainOptions {
  /** Continue from the run folder's latest complete checkpoint (an error when there is none). */
  resume: boolean;
  /** Where the run reports: a function given plain lines, or a display (createProgressDisplay(process.stdout)). */
  progress: ProgressFn | ProgressDisplay;
  /**
   * Stops the loop at the next safe point, dropping the step in progress (or after the step, with a checkpoint, when
   * its work is done): src/run/interrupt.ts; default never.
   */
  stop?: StopRequest;
  /**
   * The rollout exchange with the processes of the other agents, called each step when the source has filled the
   * table and before any learner reads it; default none (every agent trains in this process).
   */
  exchange?: StepExchange;
  /**
   * The tokenizers of the agents other processes train (partnerTokenizers), when the caller has read them already
   * (an agent process checks its partners' records with them); default: read here.
   */
  partners?: ReadonlyMap<string, Tokenizer>;
}

/**
 * Runs (or resumes) the training described by `cfg`, holding the lock of its runDir throughout: a second process on
 * the same runDir fails at once, naming this one's PID.
 */
export async function trainRl(cfg: RunConfig, options: TrainOptions): Promise<void> {
  const run = resolveRun(cfg);
  const refusal = precisionRefusal(run.agents);
  if (refusal) throw new Error(refusal);
  const lock = await lockRunDir(run.runDir);
  try {
    await trainLocked(run, options);
  } finally {
    await lock.release();
  }
}

/** trainRl's work, once the runDir is locked. */
async function trainLocked(r: ResolvedRun, options: TrainOptions): Promise<void> {
  const k = engine();
  const display = typeof options.progress === 'function' ? createProgressDisplay(options.progress) : options.progress;
  const run = new RunFolder(r.runDir);
  // Under an exchange, the agents other processes train are partners: their weights are never loaded here.
  const local = (name: string): boolean => options.exchange?.local.has(name) ?? true;
  const state = await openRun(run, r, options.resume, display, local);
  // An agent that joins a run under way starts after the partners' newest step, its prompts where theirs are.
  const joined = options.exchange?.startStep ?? 0;
  if (state.step < joined) {
    state.step = joined;
    state.cursor.position = joined * r.promptsPerStep;
  }
  const team = await buildLearners(r, state, local, options.partners ?? (await partnerTokenizers(r.agents, local)));
  const source = await runSource(r, team, state.cursor, k);
  const log = await StepLog.open(run, r.steps, r.health, team, display, options.resume);
  const watch = new StepWatch(display, r.steps, options.stop);
  const unwatch = watchWork(watch);
  try {
    await stepLoop({ r, options, k, display, run, state, team, source, log, watch });
  } catch (e) {
    // A stop at a safe point: the step in progress is dropped, the newest checkpoint is where a resume starts.
    if (e instanceof StopPoint)
      throw options.stop!.dropped(state.step + 1, watch.current, await run.latestCheckpoint());
    throw e;
  } finally {
    unwatch();
  }
  display.done();
}

/** What the step loop works with: the run, its state (advanced in place), its learners, source, log and watch. */
interface StepLoop {
  r: ResolvedRun;
  options: TrainOptions;
  k: Kernels;
  display: ProgressDisplay;
  run: RunFolder;
  state: TrainState;
  team: TeamMember[];
  source: SampleSource;
  log: StepLog;
  watch: StepWatch;
}

/** The steps from `state.step` to the last, each sampled, exchanged, trained, validated, logged and checkpointed. */
async function stepLoop({ r, options, k, display, run, state, team, source, log, watch }: StepLoop): Promise<void> {
  const { recipe, loop } = r;
  const shared = recipe.sharing !== 'none';
  const orderRng = Rng.fromState(state.rngs.order!);
  // A resume starts after a checkpoint (step ≥ 1), so the base models are validated once.
  if (loop.eval.atStart && state.step === 0) {
    watch.startStep(-1);
    await log.baseValidation(await source.validate(loop.validation, watch.phase));
  }
  for (let step = state.step; step < r.steps; step++) {
    const start = performance.now();
    watch.startStep(step);
    const here: SampleRecord[] = [];
    const sampledHere = await source.collect({ k, step, phase: watch.phase }, here);
    const completed = (await options.exchange?.complete(step + 1, here, sampledHere)) ?? {
      table: here,
      sampled: sampledHere,
    };
    const { table, sampled } = completed;
    const sampleSeconds = (performance.now() - start) / 1e3;
    const learned = teamStep(table, team, recipe, k, orderRng, step, watch.phase, completed.versions);
    const trainSeconds = learned.reduce((t, l) => t + l.seconds, 0);
    // Validation every eval.every steps and always after the last one (eval.every = 0: only then).
    const last = step + 1 === r.steps;
    const evalNow = last || (loop.eval.every > 0 && (step + 1) % loop.eval.every === 0);
    const validations = evalNow ? await source.validate(loop.validation, watch.phase) : [];
    const seconds = (performance.now() - start) / 1e3;
    watch.endStep(seconds);
    await log.step({
      step: step + 1,
      sampled,
      learned,
      sampleSeconds,
      trainTokensPerS: trainSeconds > 0 ? watch.trainTokens / trainSeconds : 0,
      validations,
      samples: source.logRows(step + 1),
      seconds,
      capability: shared ? team.map((l) => l.capability.estimate()) : null,
    });
    // A step with nothing to train on (every group filtered out) made no update: it is not a non-finite step.
    const updates = learned.reduce((n, r) => n + r.updates, 0);
    const allSkipped = updates > 0 && learned.reduce((n, r) => n + r.skippedUpdates, 0) === updates;
    state.nonFiniteStreak = allSkipped ? state.nonFiniteStreak + 1 : 0;
    if (state.nonFiniteStreak >= loop.maxNonFiniteSteps) {
      const ref = await run.latestCheckpoint();
      throw new Error(
        `stopping: ${state.nonFiniteStreak} consecutive steps had a non-finite loss or gradient (lower the learning ` +
          `rate?); the last good checkpoint is ${ref ? ref.dir : 'none (no checkpoint was written yet)'}`,
      );
    }
    state.step = step + 1;
    // A stop that came after the step's last safe point keeps the finished step.
    const stopping = options.stop?.requested === true;
    if (last || stopping || (loop.checkpoint.every > 0 && (step + 1) % loop.checkpoint.every === 0)) {
      state.rngs = { order: orderRng.state() };
      const saved = saveLearners(state, team, shared);
      const ref = await run.commitCheckpoint(step + 1, (dir) => saveTrainState(dir, saved), loop.checkpoint.keepLast);
      display.message(`checkpoint ${ref.dir}`);
      if (stopping && !last) throw options.stop!.interrupted(step + 1, ref.dir);
    }
  }
}

/**
 * The state of the `local` agents to start from: a fresh run's (refused when the run folder already holds one), or with
 * `resume` the latest complete checkpoint of a run started with the same configuration (its logs cut back to that
 * step).
 */
async function openRun(
  run: RunFolder,
  r: ResolvedRun,
  resume: boolean,
  display: ProgressDisplay,
  local: IsLocal,
): Promise<TrainState> {
  if (!resume) {
    if (await run.latestCheckpoint().catch(() => null))
      throw new Error(`${r.runDir} already holds a run; pass --resume to continue it, or choose another runDir`);
    const state = await initialState(r.agents, r.seed, local);
    await run.init(r.saved);
    await run.truncateLogsAfter(-1);
    return state;
  }
  const latest = await run.latestCheckpoint();
  if (!latest) throw new Error(`--resume: no complete checkpoint in ${r.runDir}/checkpoints; start without --resume`);
  // Both sides go through the same parse of their JSON: a section defaulted to {} in memory (zod's default is not
  // parsed) has its own defaults filled when the saved file is read back.
  const normal = (c: unknown): string => JSON.stringify(parseSavedRunConfig(c, run.path('config')));
  if (normal(await run.readConfig()) !== normal(r.saved))
    throw new Error(
      `--resume: the configuration differs from the one ${r.runDir} was started with; resume with the same file and overrides`,
    );
  const precisions = new Map(r.agents.map((a) => [a.name, a.precision]));
  const checkpoint = await loadNewestValidState(
    run.path('checkpoints'),
    (line) => display.message(line),
    (agent) => precisions.get(agent) ?? 'fp32',
  );
  const state = await withEveryAgent(r.agents, r.seed, checkpoint, local);
  await run.truncateLogsAfter(state.step);
  display.message(
    state.step >= r.steps
      ? `${r.runDir} is already finished (step ${state.step} of ${r.steps}): nothing to resume`
      : `resuming ${r.runDir} from step ${state.step}`,
  );
  return state;
}
