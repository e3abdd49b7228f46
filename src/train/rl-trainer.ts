/**
 * The RLVR training loop for every algorithm: each step, the sources fill one table of samples (sample-table.ts), then
 * every learner updates on its view of it (learner-step.ts) — a single-agent run is a team of one that does not share.
 * Per-step metrics (namespaced per agent, `agent/NAME/metric`) and samples go to the run folder, with validation,
 * atomic checkpoints, and a resume that continues bit for bit.
 */
import { performance } from 'node:perf_hooks';
import { engine } from '../backend/engine.js';
import { CapabilityTracker } from '../algorithms/hacpo/index.js';
import { ALGORITHM_RECIPES } from '../algorithms/recipes.js';
import type { RunConfig } from '../config/rl-config.js';
import { resolveAgents, type ResolvedAgent } from '../config/rl-config.js';
import { evaluate } from '../eval/evaluate.js';
import { loadPretrained } from '../model/pretrained.js';
import type { Transformer } from '../model/transformer.js';
import { AdamW } from '../optim/adamw.js';
import { learningRate } from '../optim/schedule.js';
import { extractAnswer } from '../rewards/extract.js';
import { loadRewardModule } from '../rewards/load-reward.js';
import { formatReward, mathReward, type WeightedReward } from '../rewards/reward.js';
import type { Agent } from '../rollout/rollout.js';
import { RunFolder } from '../run/run-folder.js';
import { loadTrainState, saveTrainState, type DataCursor, type TrainState } from '../run/train-state.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { Problem } from '../tasks/problem.js';
import { Rng } from '../util/rng.js';
import { learnerStep, type Learner, type UpdateRecipe } from './learner-step.js';
import { RolloutSource, type RolloutOptions, type StepMetrics } from './sample-sources.js';
import { addLearnerTokens, type SampleRecord } from './sample-table.js';
import { workflowSourceOf } from './workflow-run.js';

/** What the loop reports as it goes (one call per step, and for checkpoints and evaluations). */
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

/** A fresh state: the agents as their checkpoints hold them, new optimizers, RNGs from the seed. */
async function initialState(cfg: RunConfig, agents: ResolvedAgent[]): Promise<TrainState> {
  return {
    step: 0,
    nonFiniteStreak: 0,
    cursor: { epoch: 0, position: 0 },
    rngs: { order: new Rng(cfg.seed * 7919 + 1).state() },
    agents: await Promise.all(
      agents.map(async (a, i) => {
        const pretrained = await loadPretrained(a.checkpoint);
        return {
          name: a.name,
          pretrained,
          optimizer: { step: 0, m: new Map(), v: new Map() },
          rngs: { sampling: new Rng(cfg.seed * 104729 + 17 * i + 2).state() },
        };
      }),
    ),
    extra: {},
  };
}

/** Options of a training run. */
export interface TrainOptions {
  /** Continue from the run folder's latest complete checkpoint (an error when there is none). */
  resume: boolean;
  progress: ProgressFn;
}

/** Runs (or resumes) the training described by `cfg`. */
export async function trainRl(cfg: RunConfig, options: TrainOptions): Promise<void> {
  const k = engine();
  const run = new RunFolder(cfg.runDir);
  const agentsCfg = resolveAgents(cfg);
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
    state = await loadTrainState(latest.dir);
    await run.truncateLogsAfter(state.step);
    options.progress(`resuming ${cfg.runDir} from step ${state.step}`);
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
    agentsCfg.map(async (a) => (cfg.optim.klCoef > 0 ? (await loadPretrained(a.checkpoint)).model : null)),
  );
  const orderRng = Rng.fromState(state.rngs.order!);
  const samplingRngs = state.agents.map((a) => Rng.fromState(a.rngs.sampling!));
  const started = performance.now();
  const firstStep = state.step;

  const recipe = updateRecipe(cfg);
  const shared = recipe.sharing !== 'none';
  const trackers = restoreTrackers(cfg, state);
  // AT-GRPO: a workflow's episodes fill the table instead of single-turn rollouts.
  const workflow = workflowSourceOf(cfg, agents, samplingRngs, k);
  const source =
    workflow ??
    new RolloutSource(
      agents.map((policy, i) => ({
        name: policy.name,
        policy,
        rollout: rolloutOptions(agentsCfg[i]!, rewards),
        rng: samplingRngs[i]!,
      })),
    );
  const byName = new Map(agents.map((a) => [a.name, a]));

  for (let step = state.step; step < cfg.steps; step++) {
    const problems = nextProblems(train, cfg.seed, state.cursor, cfg.rollout.promptsPerStep);
    const t0 = performance.now();
    const table: SampleRecord[] = [];
    const sampled = await source.collect({ problems, k, step }, table);
    if (shared) for (const a of agents) addLearnerTokens(table, a, byName);
    // Eq. 9: this step's mean reward enters each agent's window before anyone updates.
    if (shared) agents.forEach((a, i) => trackers[i]!.record(sampled.get(a.name)!.reward_mean!));
    const capability = trackers.map((t) => t.estimate());
    const tSampled = performance.now();
    const team: Learner[] = agents.map((policy, i) => ({
      policy,
      optimizer: optimizers[i]!,
      reference: references[i]!,
      lr: agentLr(cfg, agentsCfg[i]!, step),
      alpha: agentsCfg[i]!.alpha,
      stepwise: { delta: agentsCfg[i]!.delta, deltaStep: agentsCfg[i]!.deltaStep },
      order: agentsCfg[i]!.order,
    }));
    const row: Record<string, unknown> = { step: step + 1 };
    // Validation every eval.every steps and always after the last one (eval.every = 0: only then).
    const evalNow = step + 1 === cfg.steps || (cfg.eval.every > 0 && (step + 1) % cfg.eval.every === 0);
    const workflowVal = evalNow && workflow ? await workflow.validate(cfg.eval.problems) : null;
    let allSkipped = true;
    for (const [i, agent] of agents.entries()) {
      const t1 = performance.now();
      const r = learnerStep(table, team, i, recipe, capability, k, orderRng);
      const t2 = performance.now();
      allSkipped &&= r.skippedUpdates >= r.updates;
      const own = sampled.get(agent.name)!;
      const metrics: StepMetrics = {
        ...own,
        ...r.metrics,
        time_train_s: (t2 - t1) / 1e3,
        tokens_per_s: own.tokens! / ((t2 - t1 + (tSampled - t0) / agents.length) / 1e3),
      };
      const val = workflowVal ?? (evalNow && validation.length > 0 ? await validate(agent, validation, cfg) : null);
      Object.assign(row, namespaced(agent.name, { ...metrics, ...(val ? { val_accuracy: val } : {}) }));
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
      const done = step + 1 - firstStep;
      const eta = ((performance.now() - started) / done / 1e3) * (cfg.steps - step - 1);
      options.progress(
        `step ${step + 1}/${cfg.steps} ${agent.name}  reward ${metrics.reward_mean!.toFixed(3)}  ` +
          `accuracy ${(100 * metrics.accuracy!).toFixed(1)}%  ${Math.round(metrics.tokens_per_s!)} tok/s  ` +
          (shared ? `P̂ ${capability[i]!.toFixed(3)}  ` : '') +
          `ETA ${Math.round(eta)}s` +
          (val ? `  val ${JSON.stringify(val)}` : ''),
      );
    }
    if (workflow) await run.appendSamples(workflow.transcript(step + 1));
    await run.appendMetrics(row as { step: number });
    state.nonFiniteStreak = allSkipped ? state.nonFiniteStreak + 1 : 0;
    if (state.nonFiniteStreak >= cfg.maxNonFiniteSteps) {
      const last = await run.latestCheckpoint();
      throw new Error(
        `stopping: ${state.nonFiniteStreak} consecutive steps had a non-finite loss or gradient (lower the learning ` +
          `rate?); the last good checkpoint is ${last ? last.dir : 'none (no checkpoint was written yet)'}`,
      );
    }
    state.step = step + 1;
    const last = step + 1 === cfg.steps;
    if (last || (cfg.checkpoint.every > 0 && (step + 1) % cfg.checkpoint.every === 0)) {
      state.rngs = { order: orderRng.state() };
      if (shared) state.extra.capability = Object.fromEntries(agents.map((a, i) => [a.name, trackers[i]!.history()]));
      state.agents.forEach((a, i) => {
        a.optimizer = optimizers[i]!.state();
        a.rngs = { sampling: samplingRngs[i]!.state() };
      });
      const ref = await run.commitCheckpoint(step + 1, (dir) => saveTrainState(dir, state), cfg.checkpoint.keepLast);
      options.progress(`checkpoint ${ref.dir}`);
    }
  }
}

/** Each agent's capability tracker, with the history a resumed run saved (empty for a fresh run). */
function restoreTrackers(cfg: RunConfig, state: TrainState): CapabilityTracker[] {
  const saved = (state.extra.capability ?? {}) as Record<string, number[]>;
  return state.agents.map((a) => CapabilityTracker.fromHistory(cfg.hacpo.capabilityWindow, saved[a.name] ?? []));
}

/** Greedy accuracy of an agent on each validation set (the first eval.problems problems of each). */
async function validate(
  agent: Agent,
  sets: { name: string; problems: Problem[] }[],
  cfg: RunConfig,
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const a = resolveAgents(cfg).find((x) => x.name === agent.name)!;
  for (const d of sets) {
    const problems = cfg.eval.problems > 0 ? d.problems.slice(0, cfg.eval.problems) : d.problems;
    const report = await evaluate(agent.model, engine(), agent.tokenizer, problems, {
      maxNewTokens: a.maxNewTokens,
      prompt: { template: a.template, ...(a.system === undefined ? {} : { system: a.system }) },
    });
    out[d.name] = report.greedy.value;
  }
  return out;
}
