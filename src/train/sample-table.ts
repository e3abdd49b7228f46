/**
 * The table of a step's samples: every response becomes one plain, serialisable, immutable record — who generated
 * it, in which role and episode, for which prompt group, the generator's token ids and pre-update log-probs, its
 * reward parts and flags. Sources fill the table (sample-sources.ts); what a learner adds — its own tokens of every
 * response it trains on, what it could not spell — lives in its view (learnerView), never in the shared record.
 */
import { z } from 'zod';
import {
  normalizedLogProb,
  ratioDivisor,
  responseCharacters,
  type RatioNormalization,
} from '../algorithms/hacpo/index.js';
import { retokenizeResponse, UnencodableTextError } from '../rollout/retokenize.js';
import type { Agent } from '../rollout/rollout.js';

const tokenIds = z.array(z.number().int().min(0));

/**
 * One response of the step, as its generator made it: the one definition of a sample, from which its type, the wire
 * format of src/distributed and that format's validation derive.
 */
export const SampleSchema = z.strictObject({
  /** Position in the step's table. */
  id: z.number().int().min(0),
  /** The policy (agent) that generated it. */
  generator: z.string(),
  /** The role it acted in (a single-turn run: the generator's name). */
  role: z.string(),
  /** The episode it belongs to (a single-turn run: one episode per response). */
  episode: z.number().int().min(0),
  /** The prompt group: responses to the same prompt this step share a group-relative baseline. */
  group: z.number().int().min(0),
  /** A workflow's turn (from 0) and its validated group key (instance|role|turn); absent for single-turn runs. */
  turn: z.number().int().min(0).optional(),
  groupKey: z.string().optional(),
  /** The question as given, the gold answer and the response text the reward saw. */
  prompt: z.string(),
  gold: z.string(),
  text: z.string(),
  /** The generator's token ids: its rendering of the prompt, and the response it sampled. */
  tokens: z.strictObject({ prompt: tokenIds, response: tokenIds }),
  /**
   * The generator's pre-update log-prob of each of its response tokens (nats, T 1): by the training forward pass, or
   * the sampler's own under optim.oldLogProbs 'sampler'.
   */
  generatorLogProbs: z.array(z.number().max(0)),
  /**
   * The same log-probs as the sampler computed them while generating (the decode path; nats, temperature 1), which
   * the rollout correction weighs against generatorLogProbs; absent where the source does not record them (workflows).
   */
  samplingLogProbs: z.array(z.number().max(0)).optional(),
  /** Total reward and its named parts (unweighted values). */
  reward: z.number(),
  rewardParts: z.record(z.string(), z.number()),
  /** Generation hit maxNewTokens before EOS. */
  truncated: z.boolean(),
  /** Generation ended on the generator's EOS. */
  stoppedByEos: z.boolean(),
});

/** One response of the step (SampleSchema): immutable once in the table. */
export type SampleRecord = Readonly<z.output<typeof SampleSchema>>;

/** What a learner's view reads of an agent: its name and its tokenizer, never its weights. */
export type Teammate = Pick<Agent, 'name' | 'tokenizer'>;

/** A response in one learner's tokenization. */
export interface LearnerTokens {
  /** The learner's own rendering of the prompt. */
  prompt: number[];
  response: number[];
  /** How many leading generator tokens the generator's old mean covers (retokenize.ts). */
  generatorSpan: number;
}

/** A learner's view of the step's table: the records it trains on, in its own tokens. */
export interface LearnerView {
  /** Indices into the table of the records it trains on, in table order. */
  records: number[];
  /** Per table record: the learner's tokens of it; undefined where it does not train on it. */
  tokens: (LearnerTokens | undefined)[];
  /** Records it could not train on (foreign text its tokenizer cannot spell, or nothing left to train on). */
  dropped: number;
}

/**
 * The view of `learner`: its own records in the tokens it sampled, and when `shared` every other agent's it can spell,
 * re-tokenized through text when the tokenizers differ (spec §6) after its own rendering of the same prompt — taken
 * from its own records of the group, or from `prompts` (by group) where it has none (an asynchronous step).
 */
export function learnerView(
  table: readonly SampleRecord[],
  learner: Teammate,
  generators: ReadonlyMap<string, Teammate>,
  shared: boolean,
  prompts?: ReadonlyMap<number, number[]>,
): LearnerView {
  const promptOf = new Map<number, number[]>(prompts);
  for (const r of table) if (r.generator === learner.name) promptOf.set(r.group, r.tokens.prompt);
  const view: LearnerView = { records: [], tokens: new Array<LearnerTokens | undefined>(table.length), dropped: 0 };
  for (const r of table) {
    if (r.generator !== learner.name && !shared) continue;
    const mine = r.generator === learner.name ? ownTokens(r) : foreignTokens(r, learner, generators, promptOf);
    if (mine === null) view.dropped++;
    else {
      view.records.push(r.id);
      view.tokens[r.id] = mine;
    }
  }
  return view;
}

/** An own record's tokens: what the learner sampled, its old log-probs covering all of it. */
function ownTokens(r: SampleRecord): LearnerTokens {
  return { prompt: r.tokens.prompt, response: r.tokens.response, generatorSpan: r.tokens.response.length };
}

/** `learner`'s tokens of a foreign record, or null when it cannot train on it. */
function foreignTokens(
  r: SampleRecord,
  learner: Teammate,
  generators: ReadonlyMap<string, Teammate>,
  promptOf: ReadonlyMap<number, number[]>,
): LearnerTokens | null {
  let mine;
  try {
    mine = retokenizeResponse(
      r.tokens.response,
      r.stoppedByEos,
      generators.get(r.generator)!.tokenizer,
      learner.tokenizer,
      promptOf.get(r.group)!,
    );
  } catch (e) {
    // A character-level learner has no id for a character outside its alphabet: that sample is not learnable.
    if (!(e instanceof UnencodableTextError)) throw e;
    return null;
  }
  if (mine.responseIds.length === 0) return null;
  return { prompt: mine.promptIds, response: mine.responseIds, generatorSpan: mine.generatorSpan };
}

/** The generator's pre-update log-probs over the span a learner's copy `mine` of the response covers (retokenize.ts). */
export function generatorSpanLogProbs(r: SampleRecord, mine: LearnerTokens): number[] {
  return r.generatorLogProbs.slice(0, mine.generatorSpan);
}

/**
 * The generator's side of HACRL Eq. 11 for a learner whose copy of the response is `mine`: its pre-update log-probs
 * summed over the span that copy covers, per token of that span ('token': their mean) or per character of the
 * response text ('char', spec §7).
 */
export function generatorOldNormalized(r: SampleRecord, mine: LearnerTokens, mode: RatioNormalization): number {
  const span = generatorSpanLogProbs(r, mine);
  return normalizedLogProb(span, ratioDivisor(mode, span.length, responseCharacters(r.text)));
}
