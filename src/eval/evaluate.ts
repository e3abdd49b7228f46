/**
 * Accuracy of an agent on a data set: greedy decoding, and k samples per problem scored as avg@k (mean accuracy of the
 * samples), pass@k (any sample right) and maj@k (the most frequent answer right), each with a 95% interval.
 */
import type { Kernels } from '../backend/kernels.js';
import { generate, type SamplingOptions } from '../model/generate.js';
import type { Transformer } from '../model/transformer.js';
import { extractAnswer } from '../rewards/extract.js';
import { verifyMany, type VerifyStats } from '../rewards/math-equal.js';
import { normalizeAnswer } from '../rewards/normalize.js';
import type { Problem } from '../tasks/problem.js';
import { renderPrompt, type PromptOptions } from '../tasks/prompt.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { meanInterval, wilson, type Estimate } from '../util/stats.js';

export { meanInterval, wilson, type Estimate };

/** How to evaluate. */
export interface EvalOptions {
  /** Samples per problem for avg@k, pass@k and maj@k; 0 = greedy only. Default 0. */
  k?: number;
  /** Sampling temperature of the k samples; default 1. */
  temperature?: number;
  /** Nucleus mass of the k samples; default 1. */
  topP?: number;
  /** Keep only the K likeliest tokens for the k samples (0 = off); default 0. */
  topK?: number;
  /** Most new tokens per response; default 256. */
  maxNewTokens?: number;
  /** Prompts per generation batch; default 32. */
  batchSize?: number;
  /** Seed of the sampling; default 0. */
  seed?: number;
  /** How questions become prompts (template, system message); default the paper's boxed-answer suffix. */
  prompt?: PromptOptions;
  /** Time limit per symbolic answer check in milliseconds; default 2000. */
  timeoutMs?: number;
  /** Names the model in sampling errors (its folder); default 'the model'. */
  name?: string;
}

/** One problem's outcome. */
export interface ProblemResult {
  id: string;
  gold: string;
  /** The prompt text the model was given: the question through the template, system message and chat template. */
  rendered_prompt: string;
  /** The greedy response and its extracted answer. */
  greedy: { response: string; answer: string | null; correct: boolean };
  /** Correctness of each of the k samples. */
  samples: boolean[];
}

/** The evaluation of one agent on one data set. */
export interface EvalReport {
  greedy: Estimate;
  /** Present when k > 0. */
  avgAtK: Estimate | null;
  passAtK: Estimate | null;
  majAtK: Estimate | null;
  k: number;
  /** Verdict counts of every answer check (time-outs and unparseable golds are counted here, never scored silently). */
  checks: VerifyStats;
  problems: ProblemResult[];
}

/** The prompt token ids of each problem for this agent. */
export function promptIds(tokenizer: Tokenizer, problems: readonly Problem[], o: PromptOptions = {}): number[][] {
  return problems.map((p) => tokenizer.encode(renderPrompt(tokenizer, p.prompt, o)));
}

/** Generates one response per prompt in batches; returns the decoded texts without special tokens. */
function respond(
  model: Transformer,
  k: Kernels,
  tokenizer: Tokenizer,
  prompts: number[][],
  o: SamplingOptions,
  batchSize: number,
): string[] {
  const out: string[] = [];
  for (let i = 0; i < prompts.length; i += batchSize) {
    const decode = (ids: number[]): string => tokenizer.decode(ids, { skipSpecialTokens: true });
    const gens = generate(model, k, prompts.slice(i, i + batchSize), { ...o, stopTokens: [tokenizer.eosId], decode });
    for (const g of gens) out.push(g.text);
  }
  return out;
}

/** Greedy and (with k > 0) sampled accuracy of `model` on `problems`. */
export async function evaluate(
  model: Transformer,
  k: Kernels,
  tokenizer: Tokenizer,
  problems: readonly Problem[],
  options: EvalOptions = {},
): Promise<EvalReport> {
  const samplesPer = options.k ?? 0;
  const batchSize = options.batchSize ?? 32;
  const maxNewTokens = options.maxNewTokens ?? 256;
  const rendered = problems.map((p) => renderPrompt(tokenizer, p.prompt, options.prompt));
  const prompts = rendered.map((text) => tokenizer.encode(text));
  const greedyTexts = respond(
    model,
    k,
    tokenizer,
    prompts,
    { temperature: 0, maxNewTokens, name: options.name },
    batchSize,
  );
  const sampled: string[][] = problems.map(() => []);
  if (samplesPer > 0) {
    const repeated = prompts.flatMap((p) => new Array<number[]>(samplesPer).fill(p));
    const texts = respond(
      model,
      k,
      tokenizer,
      repeated,
      {
        temperature: options.temperature ?? 1,
        topP: options.topP ?? 1,
        topK: options.topK ?? 0,
        maxNewTokens,
        seed: options.seed ?? 0,
        name: options.name,
      },
      batchSize,
    );
    texts.forEach((t, i) => sampled[Math.floor(i / samplesPer)]!.push(t));
  }
  const responses = problems.flatMap((_, i) => [greedyTexts[i]!, ...sampled[i]!]);
  const answers = responses.map((r) => extractAnswer(r));
  const golds = problems.flatMap((p) => new Array<string>(1 + samplesPer).fill(p.answer));
  const pairs = answers.map((a, i) => ({ gold: golds[i]!, answer: a ?? '' }));
  const { results, stats } = await verifyMany(pairs, { timeoutMs: options.timeoutMs });
  const perProblem = problems.map((p, i): ProblemResult & { skip: boolean } => {
    const base = i * (1 + samplesPer);
    const ok = (j: number): boolean => answers[base + j] !== null && results[base + j]!.equal === true;
    return {
      id: p.id,
      gold: p.answer,
      rendered_prompt: rendered[i]!,
      greedy: { response: greedyTexts[i]!, answer: answers[base], correct: ok(0) },
      samples: sampled[i]!.map((_, j) => ok(1 + j)),
      skip: results[base]!.reason === 'unparseable-gold',
    };
  });
  const scored = perProblem.filter((r) => !r.skip);
  const majority = (i: number): boolean => {
    const votes = new Map<string, { count: number; correct: boolean }>();
    const base = i * (1 + samplesPer);
    for (let j = 1; j <= samplesPer; j++) {
      const a = answers[base + j];
      if (a === null || a === undefined) continue;
      const key = normalizeAnswer(a);
      const v = votes.get(key) ?? { count: 0, correct: results[base + j]!.equal === true };
      v.count++;
      votes.set(key, v);
    }
    let best: { count: number; correct: boolean } | null = null;
    for (const v of votes.values()) if (!best || v.count > best.count) best = v;
    return best?.correct ?? false;
  };
  const scoredIndex = perProblem.map((r, i) => (r.skip ? -1 : i)).filter((i) => i >= 0);
  return {
    greedy: wilson(scored.filter((r) => r.greedy.correct).length, scored.length),
    avgAtK: samplesPer > 0 ? meanInterval(scored.map((r) => r.samples.filter(Boolean).length / samplesPer)) : null,
    passAtK: samplesPer > 0 ? wilson(scored.filter((r) => r.samples.some(Boolean)).length, scored.length) : null,
    majAtK: samplesPer > 0 ? wilson(scoredIndex.filter(majority).length, scored.length) : null,
    k: samplesPer,
    checks: stats,
    problems: perProblem.map(({ skip: _skip, ...r }) => r),
  };
}
