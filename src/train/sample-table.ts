/**
 * The table of a step's samples: every response becomes one plain, serialisable record — who generated it, in which
 * role and episode, for which prompt group, its token ids in each learner's tokenization, the generator's pre-update
 * log-probs, its reward parts and flags. Sources fill the table (sample-sources.ts); each learner reads its view.
 */
import {
  normalizedLogProb,
  ratioDivisor,
  responseCharacters,
  type RatioNormalization,
} from '../algorithms/hacpo/index.js';
import { retokenizeResponse, UnencodableTextError } from '../rollout/retokenize.js';
import type { Agent } from '../rollout/rollout.js';

/** A response in one learner's tokenization. */
export interface LearnerTokens {
  /** The learner's own rendering of the prompt. */
  prompt: number[];
  response: number[];
  /** How many leading generator tokens the generator's old mean covers (retokenize.ts). */
  generatorSpan: number;
}

/** One response of the step. */
export interface SampleRecord {
  /** Position in the step's table. */
  id: number;
  /** The policy (agent) that generated it. */
  generator: string;
  /** The role it acted in (a single-turn run: the generator's name). */
  role: string;
  /** The episode it belongs to (a single-turn run: one episode per response). */
  episode: number;
  /** The prompt group: responses to the same prompt this step share a group-relative baseline. */
  group: number;
  /** A workflow's turn (from 0) and its validated group key (instance|role|turn); absent for single-turn runs. */
  turn?: number;
  groupKey?: string;
  /** The question as given, the gold answer and the response text the reward saw. */
  prompt: string;
  gold: string;
  text: string;
  /** Token ids per learner (by name); the generator's own entry is what it sampled. */
  tokens: Record<string, LearnerTokens>;
  /** Learners that cannot train on it, with the reason (e.g. text their tokenizer cannot spell). */
  dropped: Record<string, string>;
  /**
   * The generator's pre-update log-prob of each of its response tokens (nats, T 1): by the training forward pass, or
   * the sampler's own under optim.oldLogProbs 'sampler'.
   */
  generatorLogProbs: number[];
  /**
   * The same log-probs as the sampler computed them while generating (the decode path; nats, temperature 1), which
   * the rollout correction weighs against generatorLogProbs; absent where the source does not record them (workflows).
   */
  samplingLogProbs?: number[];
  /** Reference log-probs per learner that trains on it with a KL penalty (own responses only). */
  refLogProbs: Record<string, number[]>;
  /** Total reward and its named parts (unweighted values). */
  reward: number;
  rewardParts: Record<string, number>;
  /** Generation hit maxNewTokens before EOS. */
  truncated: boolean;
  /** Generation ended on the generator's EOS. */
  stoppedByEos: boolean;
}

/** A learner's view of the table: the records it trains on, and what they are to it. */
export interface LearnerView {
  /** Indices into the table, in table order. */
  records: number[];
  /** Records it could not train on (foreign text its tokenizer cannot spell, or nothing left to train on). */
  dropped: number;
}

/**
 * Adds `learner`'s tokens to every foreign record (re-tokenized through text when the tokenizers differ, spec §6),
 * or marks the record dropped for it. Own records already carry the generator's tokens.
 */
export function addLearnerTokens(table: SampleRecord[], learner: Agent, generators: ReadonlyMap<string, Agent>): void {
  const promptOf = new Map<number, number[]>();
  for (const r of table) if (r.generator === learner.name) promptOf.set(r.group, r.tokens[learner.name]!.prompt);
  for (const r of table) {
    if (r.generator === learner.name) continue;
    const generator = generators.get(r.generator)!;
    const own = r.tokens[r.generator]!;
    let mine;
    try {
      mine = retokenizeResponse(
        own.response,
        r.stoppedByEos,
        generator.tokenizer,
        learner.tokenizer,
        promptOf.get(r.group)!,
      );
    } catch (e) {
      // A character-level learner has no id for a character outside its alphabet: that sample is not learnable.
      if (!(e instanceof UnencodableTextError)) throw e;
      r.dropped[learner.name] = 'unencodable text';
      continue;
    }
    if (mine.responseIds.length === 0) r.dropped[learner.name] = 'no tokens';
    else
      r.tokens[learner.name] = {
        prompt: mine.promptIds,
        response: mine.responseIds,
        generatorSpan: mine.generatorSpan,
      };
  }
}

/** The records `learner` trains on: its own, plus every other agent's it has tokens for when `shared`. */
export function learnerView(table: readonly SampleRecord[], learner: string, shared: boolean): LearnerView {
  const records: number[] = [];
  let dropped = 0;
  for (const r of table) {
    if (r.generator !== learner && !shared) continue;
    if (r.tokens[learner] !== undefined) records.push(r.id);
    else dropped++;
  }
  return { records, dropped };
}

/** The generator's pre-update log-probs over the span `learner`'s copy of the response covers (retokenize.ts). */
export function generatorSpanLogProbs(r: SampleRecord, learner: string): number[] {
  return r.generatorLogProbs.slice(0, r.tokens[learner]!.generatorSpan);
}

/**
 * The generator's side of HACRL Eq. 11 for `learner`: its pre-update log-probs summed over the span the learner's copy
 * covers, per token of that span ('token': their mean) or per character of the response text ('char', spec §7).
 */
export function generatorOldNormalized(r: SampleRecord, learner: string, mode: RatioNormalization): number {
  const span = generatorSpanLogProbs(r, learner);
  return normalizedLogProb(span, ratioDivisor(mode, span.length, responseCharacters(r.text)));
}
