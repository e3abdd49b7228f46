/**
 * The agent zoo's recipes: for each heterogeneity HACPO studies, a pair of small agents warm-started on the 'easy'
 * task, each bounded by a fixed number of SFT steps and fixed seeds (never by time or by a target accuracy), so a
 * recipe always builds the same bytes on a given machine. Sizes and steps are chosen so that greedy accuracy on the
 * training distribution lands where RL has signal (about 15–50%); docs/paper-miniature.md lists the measured values.
 */
import { AgentSpecSchema, type AgentSpec } from '../model/agent-spec.js';

/** The SFT settings of one zoo agent (see SftOptions; all fixed, no time limit, no early stop). */
export interface SftRecipe {
  /** Optimizer steps. */
  steps: number;
  /** Sequences per step. */
  batchSize: number;
  /** Peak learning rate. */
  lr: number;
  /** Linear warm-up steps. */
  warmupSteps: number;
  /** Final learning rate as a fraction of the peak (1: constant after warm-up). */
  minLrRatio: number;
  /** Seed of the data order. */
  seed: number;
}

/** How one zoo agent is made. */
export interface AgentRecipe {
  /** Agent name inside its pair (also the name HACPO runs give it). */
  name: string;
  /** Architecture, size and tokenizer. */
  spec: AgentSpec;
  /** Warm-start settings. */
  sft: SftRecipe;
  /**
   * Name of the agent of the same pair this one continues (its weights and tokenizer, a fresh optimizer): the later
   * training stage of the state pair. Absent: trained from a fresh initialisation.
   */
  continues?: string;
}

/** Which heterogeneity a pair shows. */
export type PairName = 'state' | 'size' | 'model' | 'tiny';

/** The data a pair is warm-started on and measured with. */
export interface ZooData {
  /** Task preset: 'easy' (2-digit + and −). */
  task: 'easy';
  /** Training problems generated (seed `seed`); the tokenizers are fitted to their text. */
  trainN: number;
  /** Held-out test problems (same distribution, seed `seed`) the zoo accuracy is measured on. */
  evalN: number;
  /** Seed of the generated data. */
  seed: number;
  /** Question template: the bare question keeps prompts short for tiny agents. */
  template: string;
  /** Longest response when measuring accuracy, in tokens. */
  maxNewTokens: number;
}

/** Two agents that differ in one way, and the data both are warm-started on. */
export interface PairRecipe {
  name: PairName;
  /** One line saying how the two agents differ. */
  description: string;
  data: ZooData;
  agents: [AgentRecipe, AgentRecipe];
}

/** The data of the full-size pairs: 8,000 'easy' training problems, accuracy on 200 held-out ones. */
export const ZOO_DATA: ZooData = {
  task: 'easy',
  trainN: 8000,
  evalN: 200,
  seed: 0,
  template: '{question}',
  maxNewTokens: 96,
};

const spec = (s: Partial<AgentSpec>): AgentSpec => AgentSpecSchema.parse(s);
const sft = (steps: number, s: Partial<SftRecipe> = {}): SftRecipe => ({
  steps,
  batchSize: 32,
  lr: 2e-3,
  warmupSteps: 50,
  minLrRatio: 1,
  seed: 0,
  ...s,
});

/** The zoo, by pair name. `tiny` is test-sized (seconds to build, near-zero accuracy): it exercises the code paths. */
export const ZOO: Record<PairName, PairRecipe> = {
  state: {
    name: 'state',
    description: 'one model at two training stages (Qwen3-style, character tokenizer)',
    data: ZOO_DATA,
    agents: [
      { name: 'early', spec: spec({ arch: 'qwen3', hidden: 64, layers: 2, heads: 4 }), sft: sft(300) },
      {
        name: 'late',
        spec: spec({ arch: 'qwen3', hidden: 64, layers: 2, heads: 4 }),
        sft: sft(100, { warmupSteps: 0, seed: 1 }),
        continues: 'early',
      },
    ],
  },
  size: {
    name: 'size',
    description: 'a small and a larger Qwen3-style model sharing one character tokenizer',
    data: ZOO_DATA,
    agents: [
      { name: 'small', spec: spec({ arch: 'qwen3', hidden: 48, layers: 2, heads: 4 }), sft: sft(350) },
      { name: 'large', spec: spec({ arch: 'qwen3', hidden: 96, layers: 3, heads: 4 }), sft: sft(200) },
    ],
  },
  model: {
    name: 'model',
    description: 'two families with different tokenizers: Qwen3-style + byte-level BPE, Llama-style + characters',
    data: ZOO_DATA,
    agents: [
      {
        name: 'qwen',
        spec: spec({ arch: 'qwen3', hidden: 64, layers: 2, heads: 4, tokenizer: 'bpe', bpeVocab: 384 }),
        sft: sft(340),
      },
      { name: 'llama', spec: spec({ arch: 'llama', hidden: 64, layers: 2, heads: 4, seed: 2 }), sft: sft(375) },
    ],
  },
  tiny: {
    name: 'tiny',
    description: 'test-sized: two one-layer Qwen3-style models sharing a character tokenizer (size heterogeneity)',
    data: { ...ZOO_DATA, trainN: 300, evalN: 12, maxNewTokens: 24 },
    agents: [
      { name: 'small', spec: spec({ hidden: 16, layers: 1, heads: 2 }), sft: sft(6, { batchSize: 8, warmupSteps: 2 }) },
      {
        name: 'large',
        spec: spec({ hidden: 32, layers: 1, heads: 2, seed: 1 }),
        sft: sft(6, { batchSize: 8, warmupSteps: 2 }),
      },
    ],
  },
};

/** The pair named `name`, or an error listing the known ones. */
export function pairRecipe(name: string): PairRecipe {
  const pair = (ZOO as Record<string, PairRecipe | undefined>)[name];
  if (pair === undefined) throw new Error(`unknown zoo pair "${name}"; known: ${Object.keys(ZOO).join(', ')}`);
  return pair;
}
