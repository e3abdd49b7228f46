/**
 * The RLVR training loop for every algorithm: each step, the sources fill one table of samples (sample-table.ts), then
 * every learner updates on its view of it (learner-step.ts) — a single-agent run is a team of one that does not share.
 * Per-step metrics (namespaced per agent, `agent/NAME/metric`; the process's memory run-level, `mem/…`) and samples go
 * to the run folder, with validation (step 0 for the base models), health warnings, a live status line, atomic
 * checkpoints, and a resume that continues bit for bit.
 */
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { CapabilityTracker } from '../algorithms/hacpo/index.js';
import { ALGORITHM_RECIPES } from '../algorithms/recipes.js';
import type { RunConfig } from '../config/rl-config.js';
import { resolveAgents, type ResolvedAgent } from '../config/rl-config.js';
import { loadPretrained } from '../model/pretrained.js';
import type { Transformer } from '../model/transformer.js';
import { AdamW } from '../optim/adamw.js';
import { learningRate } from '../optim/schedule.js';
import { extractAnswer } from '../rewards/extract.js';
import { loadRewardModule } from '../rewards/load-reward.js';
import { formatReward, mathReward, type WeightedReward } from '../rewards/reward.js';
import type { Agent } from '../rollout/rollout.js';
import { RunFolder } from '../run/run-folder.js';
import type { StopRequest } from '../run/interrupt.js';
import {
  loadNewestValidState,
  saveTrainState,
  type AgentTrainState,
  type DataCursor,
  type TrainState,
} from '../run/train-state.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { Problem } from '../tasks/problem.js';
import { readJsonl } from '../util/jsonl.js';
import { memoryMetrics } from '../util/memory.js';
import { Rng } from '../util/rng.js';
import { healthWarnings, type HealthThresholds, type HealthWarning, type MetricRow } from './health-warnings.js';
import { learnerBatches, learnerStep, type Learner, type UpdateRecipe } from './learner-step.js';
import { RolloutSource, type RolloutOptions, type StepMetrics } from './sample-sources.js';
import { addLearnerTokens, type SampleRecord } from './sample-table.js';
import { createProgressDisplay, type ProgressDisplay, type StepProgress } from './progress.js';
import { formatValidation, validateAgent, type ValidationMetrics } from './validation.js';
import { workflowSourceOf } from './workflow-run.js';

/** A sink for the run's console lines: one status line per step, and checkpoints, validations and warnings. */
export type ProgressFn = (line: string) => void;

/** The rewards the config asks for. */
async function buildRewards(cfg: RunConfig): Promise<WeightedReward[]> {
  const out: WeightedReward[] = [];
  if (cfg.reward.math !== 0) out.push({ name: 'math', fn: mathReward(), weight: cfg.reward.math });
  if (cfg.reward.format !== 0) out.push({ name: 'format', fn: formatReward(), weight: cfg.reward.format });
  for (const c of cfg.reward.custom)
    out.push({ name: c.name ?? c.path, fn: await loadRewardModule(c.path), weight: c.weight });
  return out;
}

/** The permutation of the training set used in `epoch`: a function of the seed alone, so a resume needs no state. */
function epochOrder(n: number, seed: number, epoch: number): number[] {
  return new Rng(seed * 1_000_003 + epoch).shuffle(Array.from({ length: n }, (_, i) => i));
}

/** The next `count` problems from the cursor (crossing into the next epoch when needed); advances the cursor. */
function nextProblems(train: readonly Problem[], seed: number, cursor: DataCursor, count: number): Problem[] {
  const out: Problem[] = [];
  let order = epochOrder(train.length, seed, cursor.epoch);
  while (out.length < count) {
    if (cursor.position >= order.length) {
      cursor.epoch++;
      cursor.position = 0;
      order = epochOrder(train.length, seed, cursor.epoch);
    }
    out.push(train[order[cursor.position++]!]!);
  }
  return out;
}

/** How one agent samples and is scored under the config. */
function rolloutOptions(a: ResolvedAgent, rewards: WeightedReward[]): RolloutOptions {
  return {
    groupSize: a.groupSize,
    sampling: {
      temperature: a.temperature,
      topP: a.topP,
      topK: a.topK,
      maxNewTokens: a.maxNewTokens,
      stopStrings: a.stopStrings,
    },
    prompt: { template: a.template, ...(a.system === undefined ? {} : { system: a.system }) },
    rewards,
    generationBatch: 64,
  };
}

/** The learning rate of `a` at `step` under the schedule. */
function agentLr(cfg: RunConfig, a: ResolvedAgent, step: number): number {
  const o = cfg.optim;
  return learningRate(step, {
    peak: a.lr,
    warmupSteps: o.warmupSteps,
    totalSteps: cfg.steps,
    kind: o.schedule,
    minRatio: o.minLrRatio,
  });
}

/** How foreign responses enter the loss for each hacpo.foreignClip setting. */
const FOREIGN_OBJECTIVE = { stepwise: 'hacpo', none: 'hacpo-unclipped', gspo: 'gspo' } as const;

/** The update settings of every learner: the algorithm's recipe as the config resolved it. */
export function updateRecipe(cfg: RunConfig): UpdateRecipe {
  const o = cfg.optim;
  const recipe = ALGORITHM_RECIPES[cfg.algorithm];
  return {
    surrogate: recipe.surrogate,
    sharing: recipe.sharing,
    clip: { low: o.clipLow, high: o.clipHigh },
    dualClip: o.dualClip,
    aggregation: o.lossAggregation,
    advantage: o.advantage,
    kl: o.klCoef > 0 ? { coef: o.klCoef, estimator: o.klEstimator } : null,
    entropyCoef: o.entropyCoef,
    maskTruncated: o.maskTruncated,
    filterZeroVariance: o.filterZeroVariance,
    miniBatches: o.miniBatches,
    epochs: o.epochs,
    gradClip: o.gradClip > 0 ? o.gradClip : Infinity,
    capabilityBaseline: cfg.hacpo.capabilityBaseline,
    discrepancyCoefficient: cfg.hacpo.discrepancyCoefficient,
    foreign: FOREIGN_OBJECTIVE[cfg.hacpo.foreignClip],
  };
}

/** The metric names of agent `name` in metrics.jsonl: one vocabulary, namespaced per agent. */
export function namespaced(name: string, metrics: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`agent/${name}/${k}`, v]));
}

/** Agent `name`'s metrics of a metrics.jsonl row, without their namespace (the inverse of `namespaced`). */
function agentMetrics(name: string, row: MetricRow): MetricRow {
  const prefix = `agent/${name}/`;
  return Object.fromEntries(
    Object.entries(row).flatMap(([k, v]) => (k.startsWith(prefix) ? [[k.slice(prefix.length), v]] : [])),
  );
}

/** Agent `i` as its starting checkpoint holds it, with a new optimizer and its RNGs from the seed. */
async function freshAgent(cfg: RunConfig, a: ResolvedAgent, i: number): Promise<AgentTrainState> {
  return {
    name: a.name,
    pretrained: await loadPretrained(a.checkpoint),
    optimizer: { step: 0, m: new Map(), v: new Map() },
    rngs: { sampling: new Rng(cfg.seed * 104729 + 17 * i + 2).state() },
  };
}

/** A fresh state: the agents as their checkpoints hold them, new optimizers, RNGs from the seed. */
async function initialState(cfg: RunConfig, agents: ResolvedAgent[]): Promise<TrainState> {
  return {
    step: 0,
    nonFiniteStreak: 0,
    cursor: { epoch: 0, position: 0 },
    rngs: { order: new Rng(cfg.seed * 7919 + 1).state() },
    agents: await Promise.all(agents.map((a, i) => freshAgent(cfg, a, i))),
    extra: {},
  };
}

/**
 * Completes each step's table with the records of agents that run in other processes (src/distributed). This process
 * samples, trains, validates, logs and checkpoints only its `local` agents; the others are read for their tokenizers.
 */
export interface StepExchange {
  /** Names of the agents this process runs. */
  readonly local: ReadonlySet<string>;
  /**
   * Given this process's records of step `step` (from 1; ids from 0, in agent order) and their sampling metrics,
   * returns every agent's records in agent order, numbered as one process numbers them, and every agent's metrics.
   */
  complete(
    step: number,
    table: SampleRecord[],
    sampled: Map<string, StepMetrics>,
  ): Promise<{ table: SampleRecord[]; sampled: Map<string, StepMetrics> }>;
}

/** Options of a training run. */
export interface TrainOptions {
  /** Continue from the run folder's latest complete checkpoint (an error when there is none). */
  resume: boolean;
  /** Where the run reports: a function given plain lines, or a display (createProgressDisplay(process.stdout)). */
  progress: ProgressFn | ProgressDisplay;
  /** Stops the loop after the current step, with a checkpoint (src/run/interrupt.ts); default: never. */
  stop?: StopRequest;
  /** Other processes run some of the agents and exchange records each step; default: every agent runs here. */
  exchange?: StepExchange;
}

/** Runs (or resumes) the training described by `cfg`. */
export async function trainRl(cfg: RunConfig, options: TrainOptions): Promise<void> {
  const k = engine();
  const display = typeof options.progress === 'function' ? createProgressDisplay(options.progress) : options.progress;
  const run = new RunFolder(cfg.runDir);
  const agentsCfg = resolveAgents(cfg);
  const local = (name: string): boolean => options.exchange?.local.has(name) ?? true;
  let state: TrainState;
  if (options.resume) {
    const latest = await run.latestCheckpoint();
    if (!latest)
      throw new Error(`--resume: no complete checkpoint in ${cfg.runDir}/checkpoints; start without --resume`);
    const saved = JSON.stringify(await run.readConfig());
    if (saved !== JSON.stringify(cfg))
      throw new Error(
        `--resume: the configuration differs from the one ${cfg.runDir} was started with; resume with the same file and overrides`,
      );
    state = await loadNewestValidState(run.path('checkpoints'), (line) => display.message(line));
    // A checkpoint holds this process's agents; the others start as their checkpoints (read for their tokenizers).
    const checkpointed = new Map(state.agents.map((a) => [a.name, a]));
    state.agents = await Promise.all(agentsCfg.map((a, i) => checkpointed.get(a.name) ?? freshAgent(cfg, a, i)));
    await run.truncateLogsAfter(state.step);
    display.message(`resuming ${cfg.runDir} from step ${state.step}`);
  } else {
    if (await run.latestCheckpoint().catch(() => null))
      throw new Error(`${cfg.runDir} already holds a run; pass --resume to continue it, or choose another runDir`);
    state = await initialState(cfg, agentsCfg);
    await run.init(cfg);
    await run.truncateLogsAfter(-1);
  }
  const train = (await loadDataSpec(cfg.data.train)).problems;
  const validation = await Promise.all(cfg.data.validation.map(loadDataSpec));
  const rewards = await buildRewards(cfg);
  const agents: Agent[] = state.agents.map((a) => ({
    name: a.name,
    model: a.pretrained.model,
    tokenizer: a.pretrained.tokenizer,
  }));
  const optimizers = state.agents.map((a) => {
    const opt = new AdamW(a.pretrained.model.params, { lr: cfg.optim.lr, weightDecay: cfg.optim.weightDecay });
    if (a.optimizer.step > 0) opt.load(a.optimizer);
    return opt;
  });
  const references: (Transformer | null)[] = await Promise.all(
    agentsCfg.map(async (a) =>
      cfg.optim.klCoef > 0 && local(a.name) ? (await loadPretrained(a.checkpoint)).model : null,
    ),
  );
  const orderRng = Rng.fromState(state.rngs.order!);
  const samplingRngs = state.agents.map((a) => Rng.fromState(a.rngs.sampling!));
  const history = await metricHistory(run, agents, options.resume);
  const { problems: valProblems, samplesPerProblem } = cfg.eval;
  const validate = (i: number): Promise<ValidationMetrics> =>
    validateAgent(agents[i]!, agentsCfg[i]!, validation, { problems: valProblems, samplesPerProblem, seed: cfg.seed });

  const recipe = updateRecipe(cfg);
  const shared = recipe.sharing !== 'none';
  const trackers = restoreTrackers(cfg, state);
  // AT-GRPO: a workflow's episodes fill the table instead of single-turn rollouts.
  const workflow = workflowSourceOf(cfg, agents, samplingRngs, k);
  // A resume starts after a checkpoint (step ≥ 1), so the base models are validated once. A workflow's success
  // belongs to the team: measured once and given to every policy.
  let teamAtStart: Promise<ValidationMetrics> | null = null;
  const validateBase = workflow ? () => (teamAtStart ??= workflow.validate(cfg.eval.problems)) : validate;
  if (cfg.eval.atStart && state.step === 0 && (workflow !== null || validation.length > 0))
    await validateAtStart(agents, local, validateBase, history, run, display);
  const source =
    workflow ??
    new RolloutSource(
      agents.flatMap((policy, i) =>
        local(policy.name)
          ? [{ name: policy.name, policy, rollout: rolloutOptions(agentsCfg[i]!, rewards), rng: samplingRngs[i]! }]
          : [],
      ),
    );
  const byName = new Map(agents.map((a) => [a.name, a]));

  for (let step = state.step; step < cfg.steps; step++) {
    const stepStart = performance.now();
    const problems = nextProblems(train, cfg.seed, state.cursor, cfg.rollout.promptsPerStep);
    const t0 = performance.now();
    const here: SampleRecord[] = [];
    const sampledHere = await source.collect({ problems, k, step }, here);
    const { table, sampled } = options.exchange
      ? await options.exchange.complete(step + 1, here, sampledHere)
      : { table: here, sampled: sampledHere };
    if (shared) for (const a of agents) addLearnerTokens(table, a, byName);
    // Eq. 9: this step's mean reward enters each agent's window before anyone updates (an agent left out as late
    // under exchange.onLate: continue has no reward this step).
    if (shared) agents.forEach((a, i) => sampled.has(a.name) && trackers[i]!.record(sampled.get(a.name)!.reward_mean!));
    const capability = trackers.map((t) => t.estimate());
    const tSampled = performance.now();
    const team: Learner[] = agents.map((policy, i) => ({
      policy,
      optimizer: optimizers[i]!,
      reference: references[i]!,
      lr: agentLr(cfg, agentsCfg[i]!, step),
      alpha: agentsCfg[i]!.alpha,
      stepwise: { delta: agentsCfg[i]!.delta, deltaStep: agentsCfg[i]!.deltaStep },
      ratioNormalization: agentsCfg[i]!.ratioNormalization,
      order: agentsCfg[i]!.order,
    }));
    const row: Record<string, unknown> = { step: step + 1 };
    // Validation every eval.every steps and always after the last one (eval.every = 0: only then).
    const evalNow = step + 1 === cfg.steps || (cfg.eval.every > 0 && (step + 1) % cfg.eval.every === 0);
    // A step with nothing to train on (every group filtered out) made no update: it is not a non-finite step.
    let updates = 0;
    let skipped = 0;
    for (const [i, agent] of agents.entries()) {
      if (!local(agent.name)) {
        // Another process trains it; its mini-batch draws still advance the order stream shared by the learners.
        learnerBatches(table, agent.name, team[i]!.order, recipe, orderRng);
        continue;
      }
      const t1 = performance.now();
      const r = learnerStep(table, team, i, recipe, capability, k, orderRng);
      const t2 = performance.now();
      updates += r.updates;
      skipped += r.skippedUpdates;
      const own = sampled.get(agent.name)!;
      const metrics: StepMetrics = {
        ...own,
        ...r.metrics,
        time_train_s: (t2 - t1) / 1e3,
        tokens_per_s: own.tokens! / ((t2 - t1 + (tSampled - t0) / agents.length) / 1e3),
      };
      const val = !workflow && evalNow && validation.length > 0 ? await validate(i) : null;
      const agentRow: Record<string, unknown> = { ...metrics, ...val };
      const health = { ...cfg.logging, maxNewTokens: agentsCfg[i]!.maxNewTokens };
      for (const w of recordHealth(history.get(agent.name)!, agentRow, health))
        display.message(`warning at step ${step + 1} (${agent.name}): ${w.message}`);
      Object.assign(row, namespaced(agent.name, agentRow));
      await run.appendSamples(
        table
          .filter((s) => !workflow && s.generator === agent.name)
          .slice(0, cfg.samplesPerStep)
          .map((s) => ({
            step: step + 1,
            agent: agent.name,
            prompt: s.prompt,
            response: s.text,
            answer: extractAnswer(s.text),
            gold: s.gold,
            reward: s.reward,
            correct: s.reward > 0,
          })),
      );
      if (val) display.message(`step ${step + 1} ${agent.name}  ${formatValidation(val)}`);
    }
    // Memory belongs to the process, not to an agent: run-level fields, measured once every learner has updated.
    const memory = memoryMetrics();
    Object.assign(row, memory);
    if (workflow) {
      await run.appendSamples(workflow.transcript(step + 1));
      // The team's success needs every policy's update of this step, so it is validated after the last learner.
      const val = evalNow ? await workflow.validate(cfg.eval.problems) : null;
      if (val) {
        for (const agent of agents) Object.assign(row, namespaced(agent.name, val));
        display.message(`step ${step + 1} workflow  ${formatValidation(val)}`);
      }
    }
    await run.appendMetrics(row as { step: number });
    const seconds = (performance.now() - stepStart) / 1e3;
    const shown = agents.flatMap((a, i) => (sampled.has(a.name) ? [i] : []));
    const pHats = shared ? shown.map((i) => capability[i]!) : null;
    const progress = agentProgress(
      shown.map((i) => agents[i]!),
      sampled,
      pHats,
      seconds,
    );
    display.step({ step: step + 1, total: cfg.steps, seconds, rssMiB: memory['mem/rss_mib'], ...progress });
    state.nonFiniteStreak = updates > 0 && skipped === updates ? state.nonFiniteStreak + 1 : 0;
    if (state.nonFiniteStreak >= cfg.maxNonFiniteSteps) {
      const last = await run.latestCheckpoint();
      throw new Error(
        `stopping: ${state.nonFiniteStreak} consecutive steps had a non-finite loss or gradient (lower the learning ` +
          `rate?); the last good checkpoint is ${last ? last.dir : 'none (no checkpoint was written yet)'}`,
      );
    }
    state.step = step + 1;
    const last = step + 1 === cfg.steps;
    const stopping = options.stop?.requested === true;
    if (last || stopping || (cfg.checkpoint.every > 0 && (step + 1) % cfg.checkpoint.every === 0)) {
      state.rngs = { order: orderRng.state() };
      if (shared) state.extra.capability = Object.fromEntries(agents.map((a, i) => [a.name, trackers[i]!.history()]));
      state.agents.forEach((a, i) => {
        a.optimizer = optimizers[i]!.state();
        a.rngs = { sampling: samplingRngs[i]!.state() };
      });
      const mine = { ...state, agents: state.agents.filter((a) => local(a.name)) };
      const ref = await run.commitCheckpoint(step + 1, (dir) => saveTrainState(dir, mine), cfg.checkpoint.keepLast);
      display.message(`checkpoint ${ref.dir}`);
      if (stopping && !last) throw options.stop!.interrupted(step + 1, ref.dir);
    }
  }
  display.done();
}

/** Each agent's capability tracker, with the history a resumed run saved (empty for a fresh run). */
function restoreTrackers(cfg: RunConfig, state: TrainState): CapabilityTracker[] {
  const saved = (state.extra.capability ?? {}) as Record<string, number[]>;
  return state.agents.map((a) => CapabilityTracker.fromHistory(cfg.hacpo.capabilityWindow, saved[a.name] ?? []));
}

/**
 * Each agent's metric rows so far, without their namespace: what the health warnings read. A resume reloads them
 * from metrics.jsonl (already cut back to the checkpoint), so it warns exactly as an uninterrupted run would.
 */
async function metricHistory(
  run: RunFolder,
  agents: readonly Agent[],
  resume: boolean,
): Promise<Map<string, MetricRow[]>> {
  const rows = resume ? await readJsonl(run.path('metrics'), z.looseObject({})) : [];
  return new Map(agents.map((a) => [a.name, rows.map((row) => agentMetrics(a.name, row))]));
}

/**
 * The base models' validation of the agents this process runs, logged as the row of step 0 so that every curve starts
 * before the first update.
 */
async function validateAtStart(
  agents: readonly Agent[],
  local: (name: string) => boolean,
  validate: (i: number) => Promise<ValidationMetrics>,
  history: Map<string, MetricRow[]>,
  run: RunFolder,
  display: ProgressDisplay,
): Promise<void> {
  const row: Record<string, unknown> = { step: 0 };
  for (const [i, agent] of agents.entries()) {
    if (!local(agent.name)) continue;
    const val = await validate(i);
    Object.assign(row, namespaced(agent.name, val));
    history.get(agent.name)!.push(val);
    display.message(`step 0 ${agent.name}  ${formatValidation(val)}`);
  }
  await run.appendMetrics(row as { step: number });
}

/**
 * Adds `warn/<kind>` = 1 to an agent's `metrics` of this step for every health warning they raise after `history`,
 * and appends them to it; returns the warnings raised for the first time (the ones to print).
 */
function recordHealth(history: MetricRow[], metrics: Record<string, unknown>, t: HealthThresholds): HealthWarning[] {
  const warnings = healthWarnings([...history, metrics], t);
  for (const w of warnings) metrics[w.metric] = 1;
  history.push(metrics);
  return warnings.filter((w) => w.first);
}

/** The status line's agent part after a step of `seconds`: each one's reward and accuracy (P̂ when shared), tokens/s. */
function agentProgress(
  agents: readonly Agent[],
  sampled: ReadonlyMap<string, StepMetrics>,
  pHats: readonly number[] | null,
  seconds: number,
): Pick<StepProgress, 'agents' | 'tokensPerS'> {
  const own = agents.map((a) => sampled.get(a.name)!);
  return {
    agents: agents.map((a, i) => ({
      name: a.name,
      reward: own[i]!.reward_mean!,
      accuracy: own[i]!.accuracy!,
      ...(pHats ? { pHat: pHats[i]! } : {}),
    })),
    tokensPerS: own.reduce((n, m) => n + m.tokens!, 0) / seconds,
  };
}
