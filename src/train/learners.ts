/**
 * The team of learners, built once per run from the resolved agents: each with its policy (weights and tokenizer),
 * AdamW optimizer, frozen reference (under a KL penalty), sampling RNG, capability tracker (HACRL Eq. 9), its HACPO
 * knobs and its learning-rate schedule. A fresh run starts them from their checkpoints, a resume from the run's
 * latest; `saveLearners` writes back what a checkpoint needs to continue bit for bit. An agent another process trains
 * (src/distributed) is a partner: its tokenizer and what the table tells of it, never its weights.
 */
import { resolve } from 'node:path';
import { CapabilityTracker } from '../algorithms/hacpo/index.js';
import type { ResolvedAgent } from '../config/rl-config.js';
import { adaptedModules, LoraAdapters } from '../model/lora.js';
import { adapt, withoutAdapters } from '../model/peft.js';
import { loadPretrained, sharedBase, tokenizerFolder, type BaseModels, type Pretrained } from '../model/pretrained.js';
import { AdamW } from '../optim/adamw.js';
import { learningRate } from '../optim/schedule.js';
import type { AgentTrainState, TrainState } from '../run/train-state.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { Rng } from '../util/rng.js';
import type { Learner } from './learner-step.js';
import type { Teammate } from './sample-table.js';
import type { ResolvedRun } from './resolved-run.js';
import { Transformer } from '../model/transformer.js';

/**
 * A learner this process trains, with everything it keeps from step to step: what a step's update reads (Learner)
 * with its learning-rate schedule in place of one step's rate, its sampling RNG and its capability tracker.
 */
export interface LocalLearner extends Omit<Learner, 'lr'> {
  local: true;
  /** Its learning rate at a training step (from 0): warm-up, then the configured decay. */
  lr: (step: number) => number;
  /** The RNG its responses are sampled with. */
  rng: Rng;
  /** Its capability estimate P̂ over the last K steps (HACRL Eq. 9); read only when rollouts are shared. */
  capability: CapabilityTracker;
}

/**
 * An agent another process trains (src/distributed), as this process needs it: its tokenizer, to re-tokenize its
 * responses into a local learner's tokens and to replay its mini-batch draws (which depend on what it can spell);
 * its capability P̂ (Eq. 9, from its rewards in the table); its mini-batch order. Its weights, optimizer, reference
 * and RNGs stay with its own process: it samples nothing here, and is neither validated nor checkpointed.
 */
export interface Partner {
  local: false;
  policy: Teammate;
  capability: CapabilityTracker;
  order: Learner['order'];
}

/** A member of the run's team, in config order: a learner this process trains, or a partner. */
export type TeamMember = LocalLearner | Partner;

/** The RNG role of a LoRA agent's dropout masks. */
const LORA_DROPOUT = 'lora_dropout';

/**
 * Agent `i` as its starting checkpoint holds it, with a new optimizer and its RNGs from `seed`. A LoRA agent gets
 * fresh adapters (drawn from the seed) on its checkpoint, taken from `bases`: one frozen copy per base folder.
 */
async function freshAgent(a: ResolvedAgent, i: number, seed: number, bases: BaseModels): Promise<AgentTrainState> {
  let pretrained: Pretrained;
  if (a.lora) {
    const base = await sharedBase(resolve(a.checkpoint), bases, a.precision);
    let adapters;
    try {
      adapters = LoraAdapters.init(base.model.cfg, a.lora, resolve(a.checkpoint), seed * 104729 + 17 * i + 3);
    } catch (e) {
      throw new Error(`agent ${a.name} (${a.checkpoint}): ${(e as Error).message}`);
    }
    pretrained = { ...base, model: adapt(base.model, adapters) };
  } else pretrained = await loadPretrained(a.checkpoint, new Map(), { precision: a.precision });
  return {
    name: a.name,
    pretrained,
    optimizer: { step: 0, m: new Map(), v: new Map() },
    rngs: {
      sampling: new Rng(seed * 104729 + 17 * i + 2).state(),
      ...(pretrained.model.adapters ? { [LORA_DROPOUT]: pretrained.model.adapters.rng.state() } : {}),
    },
  };
}

/** Whether this process trains the agent of that name (default: every agent). */
export type IsLocal = (name: string) => boolean;

/**
 * A fresh state of the agents this process trains (`local`, default all), in config order, as their checkpoints hold
 * them, with new optimizers and RNGs from `seed` and their index among `agents`. A partner's weights are not loaded.
 */
export async function initialState(
  agents: readonly ResolvedAgent[],
  seed: number,
  local: IsLocal = () => true,
): Promise<TrainState> {
  const bases: BaseModels = new Map();
  return {
    step: 0,
    nonFiniteStreak: 0,
    cursor: { epoch: 0, position: 0 },
    rngs: { order: new Rng(seed * 7919 + 1).state() },
    agents: await Promise.all(agents.flatMap((a, i) => (local(a.name) ? [freshAgent(a, i, seed, bases)] : []))),
    extra: {},
  };
}

/**
 * A resumed state with every agent this process trains (`local`, default all), in config order: a checkpoint holds
 * them (an agent it lacks starts as its checkpoint holds it, RNGs from `seed`). A saved whole model holds fp32 masters
 * whatever its precision; its products follow the config's.
 */
export async function withEveryAgent(
  agents: readonly ResolvedAgent[],
  seed: number,
  state: TrainState,
  local: IsLocal = () => true,
): Promise<TrainState> {
  const saved = new Map(state.agents.map((a) => [a.name, a]));
  const bases: BaseModels = new Map();
  const every = await Promise.all(
    agents.flatMap((a, i): Promise<AgentTrainState>[] => {
      if (!local(a.name)) return [];
      const s = saved.get(a.name);
      if (!s) return [freshAgent(a, i, seed, bases)];
      const m = s.pretrained.model;
      if (m.adapters || m.precision === a.precision) return [Promise.resolve(s)];
      const model = new Transformer(m.cfg, m.params, null, a.precision);
      return [Promise.resolve({ ...s, pretrained: { ...s.pretrained, model } })];
    }),
  );
  return { ...state, agents: every };
}

/**
 * The tokenizers of the agents this process does not train (`local`), by name: each the one loadPretrained would give
 * its checkpoint, read once without its weights, for everything here that reads a partner's tokens (buildLearners,
 * an agent process's arrival checks).
 */
export async function partnerTokenizers(
  agents: readonly ResolvedAgent[],
  local: IsLocal,
): Promise<Map<string, Tokenizer>> {
  const partners = agents.filter((a) => !local(a.name));
  return new Map(
    await Promise.all(
      partners.map(
        async (a) => [a.name, await loadTokenizer((await tokenizerFolder(a.checkpoint)) ?? a.checkpoint)] as const,
      ),
    ),
  );
}

/**
 * The run's team, in config order: the learners this process trains (`local`) from `state` (fresh or resumed, holding
 * exactly them), the others as partners with their tokenizers from `partners` (partnerTokenizers). A learner keeps a
 * frozen reference when the recipe has a KL penalty.
 */
export async function buildLearners(
  run: Pick<ResolvedRun, 'agents' | 'learning' | 'recipe' | 'steps'>,
  state: TrainState,
  local: IsLocal,
  partners: ReadonlyMap<string, Tokenizer>,
): Promise<TeamMember[]> {
  const { learning, recipe } = run;
  const saved = (state.extra.capability ?? {}) as Record<string, number[]>;
  const states = new Map(state.agents.map((s) => [s.name, s]));
  return Promise.all(
    run.agents.map(async (a): Promise<TeamMember> => {
      const capability = CapabilityTracker.fromHistory(learning.capabilityWindow, saved[a.name] ?? []);
      if (!local(a.name)) {
        const tokenizer = partners.get(a.name);
        if (!tokenizer) throw new Error(`agent ${a.name}: no tokenizer was given for this partner (partnerTokenizers)`);
        return { local: false, policy: { name: a.name, tokenizer }, capability, order: a.order };
      }
      const s = states.get(a.name);
      if (!s) throw new Error(`agent ${a.name}: the run's state does not hold it, though this process trains it`);
      const model = s.pretrained.model;
      if (Boolean(a.lora) !== Boolean(model.adapters))
        throw new Error(
          `agent ${a.name}: the config ${a.lora ? 'asks for' : 'has no'} LoRA adapters but its checkpoint ` +
            `${model.adapters ? 'holds adapters' : 'is a whole model'}; resume with the config the run started with`,
        );
      if (a.lora && model.adapters) checkSameLora(a, model.adapters);
      const dropoutState = s.rngs[LORA_DROPOUT];
      if (model.adapters && dropoutState) model.adapters.rng = Rng.fromState(dropoutState);
      // Its rate comes from the schedule at every update: the optimizer keeps none of its own.
      const optimizer = new AdamW(model.trainable, { weightDecay: learning.weightDecay });
      if (s.optimizer.step > 0) optimizer.load(s.optimizer);
      const schedule = {
        peak: a.lr,
        warmupSteps: learning.warmupSteps,
        totalSteps: run.steps,
        kind: learning.schedule,
        minRatio: learning.minLrRatio,
      };
      return {
        policy: { name: s.name, model: s.pretrained.model, tokenizer: s.pretrained.tokenizer },
        local: true,
        optimizer,
        // A LoRA agent's reference is its frozen base without the adapters: no second copy of the weights.
        reference:
          recipe.kl !== null
            ? model.adapters
              ? withoutAdapters(model)
              : (await loadPretrained(a.checkpoint, new Map(), { precision: a.precision, frozen: true })).model
            : null,
        rng: Rng.fromState(s.rngs.sampling!),
        capability,
        lr: (step) => learningRate(step, schedule),
        alpha: a.alpha,
        stepwise: { delta: a.delta, deltaStep: a.deltaStep },
        ratioNormalization: a.ratioNormalization,
        order: a.order,
      };
    }),
  );
}

/** Throws when a resumed agent's adapters are not the ones its config asks for (rank, alpha, dropout, modules). */
function checkSameLora(a: ResolvedAgent, adapters: LoraAdapters): void {
  const want = a.lora!;
  const have = adapters.settings;
  const modules = (m: readonly { module: string }[]): string => m.map((x) => x.module).join(',');
  if (
    want.rank !== have.rank ||
    want.alpha !== have.alpha ||
    want.dropout !== have.dropout ||
    modules(adaptedModules(adapters.cfg, want)) !== modules(adapters.modules)
  )
    throw new Error(
      `agent ${a.name}: the checkpoint's adapters (rank ${have.rank}, alpha ${have.alpha}, dropout ${have.dropout}, ` +
        `targets ${JSON.stringify(have.targets)}) are not the config's lora ${JSON.stringify(want)}; resume with ` +
        'the config the run started with',
    );
}

/**
 * Writes the learners' optimizer and RNG states (and, when rollouts are shared, every member's capability history)
 * into `state`, the state of this process's agents that a checkpoint saves.
 */
export function saveLearners(state: TrainState, team: readonly TeamMember[], shared: boolean): TrainState {
  if (shared) state.extra.capability = Object.fromEntries(team.map((l) => [l.policy.name, l.capability.history()]));
  const learners = new Map(team.flatMap((l) => (l.local ? [[l.policy.name, l] as const] : [])));
  for (const a of state.agents) {
    const l = learners.get(a.name)!;
    a.optimizer = l.optimizer.state();
    const adapters = l.policy.model.adapters;
    a.rngs = { sampling: l.rng.state(), ...(adapters ? { [LORA_DROPOUT]: adapters.rng.state() } : {}) };
  }
  return state;
}
