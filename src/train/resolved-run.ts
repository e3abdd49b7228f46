/**
 * A run resolved once from its config: every agent's effective settings, the update recipe every learner follows,
 * the source's settings (single-turn rollouts or a workflow), the loop's, and what the exchange checks per agent.
 * Everything below the trainer takes its slice of this; per-agent values travel as rows matched by name.
 */
import { ALGORITHM_RECIPES } from '../algorithms/recipes.js';
import type { OldLogProbSource } from '../algorithms/rollout-correction.js';
import { resolveAgents, type ResolvedAgent, type RunConfig } from '../config/rl-config.js';
import type { WorkflowConfig } from '../workflows/workflow-config.js';
import type { HealthThresholds } from './health-warnings.js';
import type { UpdateRecipe } from './learner-step.js';
import type { ValidationOptions } from './validation.js';

/** Single-turn rollouts of every agent on the training problems (a config without a `workflow` section). */
export interface RolloutSettings {
  kind: 'rollout';
  /** The training data (data.train) and the validation sets (data.validation). */
  train: RunConfig['data']['train'];
  validation: RunConfig['data']['validation'];
  /** The reward section: weights of the built-in rewards and the custom modules. */
  rewards: RunConfig['reward'];
  /** Responses per policy and step written to samples.jsonl (samplesPerStep). */
  samplesLogged: number;
  /** Where the records' old log-probs come from (optim.oldLogProbs). */
  oldLogProbs: OldLogProbSource;
}

/** The episodes of a workflow, each agent the policy of the roles mapped to it. */
export interface WorkflowSettings {
  kind: 'workflow';
  workflow: WorkflowConfig;
  /** Episodes per step written turn by turn to samples.jsonl (samplesPerStep). */
  episodesLogged: number;
}

/** What every learner's optimizer and schedule follow besides its own peak rate. */
export interface LearningSettings {
  /** AdamW decoupled weight decay (optim.weightDecay). */
  weightDecay: number;
  /** The learning-rate shape: warm-up steps, decay kind and final fraction (optim.warmupSteps, schedule, minLrRatio). */
  warmupSteps: number;
  schedule: RunConfig['optim']['schedule'];
  minLrRatio: number;
  /** Steps K of the capability estimate P̂ (hacpo.capabilityWindow). */
  capabilityWindow: number;
}

/** When the loop validates and checkpoints, and when it gives up. */
export interface LoopSettings {
  /** Validation: every `every` steps and after the last (0: only then), at step 0 with `atStart`. */
  eval: { every: number; atStart: boolean };
  /** What a validation plays: problems per set, samples per problem, seed. */
  validation: ValidationOptions;
  /** Checkpoints every `every` steps and after the last (0: only then), the newest `keepLast` kept. */
  checkpoint: RunConfig['checkpoint'];
  /** Consecutive steps without a finite update before the run stops (maxNonFiniteSteps). */
  maxNonFiniteSteps: number;
}

/** What a partner's published step must hold: its prompt groups and its responses per prompt. */
export interface ExchangeShape {
  groups: number;
  groupSize: number;
}

/** The run as the trainer needs it (resolveRun). */
export interface ResolvedRun {
  /** The run folder. */
  runDir: string;
  /** The configuration as plain JSON: what the run folder saves at the start and a resume compares. */
  saved: Record<string, unknown>;
  /** The seed of every random choice, and the training steps. */
  seed: number;
  steps: number;
  /** Prompts (or workflow instances) per step B. */
  promptsPerStep: number;
  /** Every agent's effective settings, in config order. */
  agents: readonly ResolvedAgent[];
  recipe: UpdateRecipe;
  learning: LearningSettings;
  source: RolloutSettings | WorkflowSettings;
  loop: LoopSettings;
  /** Per agent: the thresholds of its health warnings. */
  health: ReadonlyMap<string, HealthThresholds>;
  /** Per agent: the shape of its published steps. */
  exchange: ReadonlyMap<string, ExchangeShape>;
}

/** The update settings of every learner: the algorithm's recipe as the config resolved it. */
function updateRecipe(cfg: RunConfig): UpdateRecipe {
  const o = cfg.optim;
  const { baseline, omegaBand, omegaPrior } = cfg.hacpo;
  return {
    surrogate: o.surrogate,
    sharing: ALGORITHM_RECIPES[cfg.algorithm].sharing,
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
    baseline: { kind: baseline, omegaBand, omegaPrior },
    foreign: cfg.hacpo.foreignSurrogate,
    ...(o.activationCheckpointing ? { activationCheckpointing: true } : {}),
    ...(o.rolloutCorrection === 'none'
      ? {}
      : {
          rolloutCorrection: {
            mode: o.rolloutCorrection,
            cap: o.rolloutCorrectionCap,
            level: o.rolloutCorrectionLevel,
          },
        }),
  };
}

/** The source's settings: the workflow when the config names one, single-turn rollouts otherwise. */
function sourceSettings(cfg: RunConfig): RolloutSettings | WorkflowSettings {
  if (cfg.workflow !== undefined)
    return { kind: 'workflow', workflow: cfg.workflow, episodesLogged: cfg.samplesPerStep };
  return {
    kind: 'rollout',
    train: cfg.data.train,
    validation: cfg.data.validation,
    rewards: cfg.reward,
    samplesLogged: cfg.samplesPerStep,
    oldLogProbs: cfg.optim.oldLogProbs,
  };
}

/** Resolves `cfg` into what the run needs: the one place the config's sections are read for training. */
export function resolveRun(cfg: RunConfig): ResolvedRun {
  const agents = resolveAgents(cfg);
  const o = cfg.optim;
  return {
    runDir: cfg.runDir,
    saved: JSON.parse(JSON.stringify(cfg)) as Record<string, unknown>,
    seed: cfg.seed,
    steps: cfg.steps,
    promptsPerStep: cfg.rollout.promptsPerStep,
    agents,
    recipe: updateRecipe(cfg),
    learning: {
      weightDecay: o.weightDecay,
      warmupSteps: o.warmupSteps,
      schedule: o.schedule,
      minLrRatio: o.minLrRatio,
      capabilityWindow: cfg.hacpo.capabilityWindow,
    },
    source: sourceSettings(cfg),
    loop: {
      eval: { every: cfg.eval.every, atStart: cfg.eval.atStart },
      validation: { problems: cfg.eval.problems, samplesPerProblem: cfg.eval.samplesPerProblem, seed: cfg.seed },
      checkpoint: cfg.checkpoint,
      maxNonFiniteSteps: cfg.maxNonFiniteSteps,
    },
    health: new Map(agents.map((a) => [a.name, { ...cfg.logging, maxNewTokens: a.maxNewTokens }])),
    exchange: new Map(agents.map((a) => [a.name, { groups: cfg.rollout.promptsPerStep, groupSize: a.groupSize }])),
  };
}
