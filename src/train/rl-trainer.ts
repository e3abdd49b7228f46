/**
 * The RLVR training loop (GRPO, GSPO, GSPO×2 alone; HACPO and naive sharing together): steps over the training problems, per-step metrics and samples in the
 * run folder, validation, atomic checkpoints, and a resume that continues bit for bit.
 */
import { performance } from 'node:perf_hooks';
import { engine } from '../backend/engine.js';
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
import type { StopRequest } from '../run/interrupt.js';
import { loadNewestValidState, saveTrainState, type DataCursor, type TrainState } from '../run/train-state.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { Problem } from '../tasks/problem.js';
import { Rng } from '../util/rng.js';
import { CapabilityTracker } from '../algorithms/hacpo/index.js';
import { isCollaborative } from '../config/algorithms.js';
import { hacpoStep, type Collaborator, type HacpoStepOptions } from './hacpo-step.js';
import type { RolloutOptions } from './policy-updates.js';
import { rlStep, type RlStepOptions, type StepResult } from './rl-step.js';

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

const klOption = (cfg: RunConfig) =>
  cfg.optim.klCoef > 0 ? { kl: { coef: cfg.optim.klCoef, estimator: cfg.optim.klEstimator } } : {};

/** The step options of one agent trained alone (grpo, gspo). */
function stepOptions(cfg: RunConfig, a: ResolvedAgent, rewards: WeightedReward[], step: number): RlStepOptions {
  const o = cfg.optim;
  const clip = { low: o.clipLow, high: o.clipHigh };
  const objective =
    cfg.algorithm === 'gspo'
      ? { kind: 'gspo' as const, clip }
      : { kind: 'grpo' as const, clip, ...(o.dualClip ? { dualClip: o.dualClip } : {}) };
  return {
    ...rolloutOptions(a, rewards),
    miniBatches: o.miniBatches,
    epochs: o.epochs,
    loss: { objective, aggregation: o.lossAggregation, maskTruncated: o.maskTruncated, ...klOption(cfg) },
    advantageNormalization: o.advantage,
    filterZeroVariance: o.filterZeroVariance,
    clip: o.gradClip > 0 ? o.gradClip : Infinity,
    lr: agentLr(cfg, a, step),
  };
}

/** The loss of foreign responses for each hacpo.foreignClip setting. */
const FOREIGN_OBJECTIVE = { stepwise: 'hacpo', none: 'hacpo-unclipped', gspo: 'gspo' } as const;

/** The run-wide options of a collaborative step; naive sharing is HACPO with every mechanism off. */
function collaborativeOptions(cfg: RunConfig): HacpoStepOptions {
  const o = cfg.optim;
  const on = cfg.algorithm === 'hacpo';
  return {
    mechanisms: {
      capabilityBaseline: on && cfg.hacpo.capabilityBaseline,
      discrepancyCoefficient: on && cfg.hacpo.discrepancyCoefficient,
      foreign: on ? FOREIGN_OBJECTIVE[cfg.hacpo.foreignClip] : 'gspo',
    },
    miniBatches: o.miniBatches,
    epochs: o.epochs,
    ownClip: { low: o.clipLow, high: o.clipHigh },
    aggregation: o.lossAggregation,
    ...klOption(cfg),
    maskTruncated: o.maskTruncated,
    filterZeroVariance: o.filterZeroVariance,
    clip: o.gradClip > 0 ? o.gradClip : Infinity,
  };
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
  /** Stops the loop after the current step, with a checkpoint (src/run/interrupt.ts); default: never. */
  stop?: StopRequest;
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
    state = await loadNewestValidState(run.path('checkpoints'), options.progress);
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

  const collaborative = isCollaborative(cfg.algorithm);
  const trackers = collaborative ? restoreTrackers(cfg, state) : [];

  for (let step = state.step; step < cfg.steps; step++) {
    const problems = nextProblems(train, cfg.seed, state.cursor, cfg.rollout.promptsPerStep);
    let results: StepResult[];
    if (collaborative) {
      const team: Collaborator[] = agents.map((agent, i) => {
        const a = agentsCfg[i]!;
        return {
          agent,
          optimizer: optimizers[i]!,
          reference: references[i]!,
          tracker: trackers[i]!,
          rollout: rolloutOptions(a, rewards),
          samplingRng: samplingRngs[i]!,
          lr: agentLr(cfg, a, step),
          // Naive sharing has no exponential IS either.
          alpha: cfg.algorithm === 'hacpo' ? a.alpha : 0,
          stepwise: { delta: a.delta, deltaStep: a.deltaStep },
          order: a.order,
        };
      });
      results = await hacpoStep(team, k, problems, collaborativeOptions(cfg), orderRng);
    } else {
      results = [];
      for (const [i, agent] of agents.entries()) {
        const o = stepOptions(cfg, agentsCfg[i]!, rewards, step);
        results.push(
          await rlStep(agent, references[i]!, optimizers[i]!, k, problems, o, {
            sampling: samplingRngs[i]!,
            order: orderRng,
          }),
        );
      }
    }
    const allSkipped = results.every((r) => r.skippedUpdates >= r.updates);
    for (const [i, agent] of agents.entries()) {
      const r = results[i]!;
      const row: Record<string, unknown> = { step: step + 1, agent: agent.name, ...r.metrics };
      // Validation every eval.every steps and always after the last one (eval.every = 0: only then).
      const evalNow = step + 1 === cfg.steps || (cfg.eval.every > 0 && (step + 1) % cfg.eval.every === 0);
      if (evalNow && validation.length > 0) row.val_accuracy = await validate(agent, validation, cfg);
      await run.appendMetrics(row as { step: number });
      await run.appendSamples(
        r.rollouts.slice(0, cfg.samplesPerStep).map((ro, j) => ({
          step: step + 1,
          agent: agent.name,
          prompt: ro.problem.prompt,
          response: ro.text,
          answer: extractAnswer(ro.text),
          gold: ro.problem.answer,
          reward: r.rewards[j],
          correct: (r.rewards[j] ?? 0) > 0,
        })),
      );
      const done = step + 1 - firstStep;
      const eta = ((performance.now() - started) / done / 1e3) * (cfg.steps - step - 1);
      options.progress(
        `step ${step + 1}/${cfg.steps} ${agent.name}  reward ${r.metrics.reward_mean!.toFixed(3)}  ` +
          `accuracy ${(100 * r.metrics.accuracy!).toFixed(1)}%  ${Math.round(r.metrics.tokens_per_s!)} tok/s  ` +
          (r.metrics.p_hat === undefined ? '' : `P̂ ${r.metrics.p_hat.toFixed(3)}  `) +
          `ETA ${Math.round(eta)}s` +
          (row.val_accuracy ? `  val ${JSON.stringify(row.val_accuracy)}` : ''),
      );
    }
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
    const stopping = options.stop?.requested === true;
    if (last || stopping || (cfg.checkpoint.every > 0 && (step + 1) % cfg.checkpoint.every === 0)) {
      state.rngs = { order: orderRng.state() };
      if (collaborative)
        state.extra.capability = Object.fromEntries(agents.map((a, i) => [a.name, trackers[i]!.history()]));
      state.agents.forEach((a, i) => {
        a.optimizer = optimizers[i]!.state();
        a.rngs = { sampling: samplingRngs[i]!.state() };
      });
      const ref = await run.commitCheckpoint(step + 1, (dir) => saveTrainState(dir, state), cfg.checkpoint.keepLast);
      options.progress(`checkpoint ${ref.dir}`);
      if (stopping && !last) throw options.stop!.interrupted(step + 1, ref.dir);
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
