/**
 * Rollouts: G sampled responses per prompt from one agent, with what training needs — prompt and response token ids,
 * the decoded text, whether the response was cut at the length limit.
 */
import type { Kernels } from '../backend/kernels.js';
import { generate, type SamplingOptions } from '../model/generate.js';
import type { Transformer } from '../model/transformer.js';
import type { Problem } from '../tasks/problem.js';
import { renderPrompt, type PromptOptions } from '../tasks/prompt.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import type { Rng } from '../util/rng.js';

/** One sampled response to one prompt. */
export interface Rollout {
  /** Index of the prompt in this step's batch (responses to the same prompt form a group). */
  group: number;
  problem: Problem;
  /** The rendered prompt as token ids of the generating agent. */
  promptIds: number[];
  /** The generated token ids (ending with EOS when the agent stopped by itself). */
  responseIds: number[];
  /** The response text without special tokens. */
  text: string;
  /** True when generation hit maxNewTokens before EOS. */
  truncated: boolean;
  /** Log-probs of the response tokens under the generator while sampling (temperature 1, nats). */
  samplingLogProbs: number[];
}

/** An agent: a model and the tokenizer it reads and writes with. */
export interface Agent {
  name: string;
  model: Transformer;
  tokenizer: Tokenizer;
}

/**
 * Samples `groupSize` responses to each problem, `batchSize` sequences per generation call, drawing from `rng`
 * (so a resumed run samples the same tokens). Responses end at the agent's EOS or at `maxNewTokens`.
 */
export function sampleRollouts(
  agent: Agent,
  k: Kernels,
  problems: readonly Problem[],
  groupSize: number,
  sampling: Omit<SamplingOptions, 'rng' | 'seed' | 'decode'>,
  rng: Rng,
  prompt: PromptOptions = {},
  batchSize = 64,
): Rollout[] {
  const { tokenizer, model } = agent;
  const promptIds = problems.map((p) => tokenizer.encode(renderPrompt(tokenizer, p.prompt, prompt)));
  const jobs = problems.flatMap((_, group) => new Array<number>(groupSize).fill(group));
  const out: Rollout[] = [];
  const stopTokens = [...new Set([tokenizer.eosId, ...(sampling.stopTokens ?? [])])];
  const decode = (ids: number[]): string => tokenizer.decode(ids, { skipSpecialTokens: true });
  for (let i = 0; i < jobs.length; i += batchSize) {
    const chunk = jobs.slice(i, i + batchSize);
    const gens = generate(
      model,
      k,
      chunk.map((g) => promptIds[g]!),
      { ...sampling, stopTokens, rng, decode },
    );
    gens.forEach((g, j) => {
      const group = chunk[j]!;
      out.push({
        group,
        problem: problems[group]!,
        promptIds: promptIds[group]!,
        responseIds: g.ids,
        text: g.text,
        truncated: g.finishReason === 'length',
        samplingLogProbs: g.logProbs,
      });
    });
  }
  return out;
}
