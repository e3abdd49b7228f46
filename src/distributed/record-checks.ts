/**
 * What a receiving agent re-checks in a partner's step beyond its shape (records.ts), against what it can compute
 * itself: every prompt and gold answer are its own draw for that step and group, every text is the generator
 * tokenizer's decoding of the response ids, every reward is the run's reward functions on (text, gold), no response is
 * longer than the generator's maxNewTokens, every group has the generator's group size, every log-prob is above a
 * floor and every accuracy lies in [0, 1]. A record that fails is refused naming the agent, the step, the field and
 * the value; what cannot be re-computed (the sampled tokens themselves, the generator's log-probs) is trusted.
 */
import { scoreSamples, type WeightedReward } from '../rewards/reward.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import type { StepMetrics } from '../train/sample-sources.js';
import type { SampleRecord } from '../train/sample-table.js';

/**
 * The lowest log-prob a sampled token can honestly have, nats. A float32 softmax gives no token of a sampled
 * sequence less than e^-104 (its smallest positive value): a log-prob below −1000 was never computed by a sampler.
 */
export const LOG_PROB_FLOOR = -1000;

/** A partner's step that fails a check: stopped or skipped by exchange.onBadRecord. */
export class BadRecord extends Error {
  override name = 'BadRecord';
}

/** What a partner's records are checked against: its settings as this run resolves them, and this run's rewards. */
export interface PartnerSettings {
  tokenizer: Tokenizer;
  /** Its responses per prompt, token limit per response, and the strings that end its responses. */
  groupSize: number;
  maxNewTokens: number;
  stopStrings: readonly string[];
}

/** The text sampling gives for `ids`: their decoding, cut before the first stop string it holds (generate.ts). */
export function sampledText(tokenizer: Tokenizer, ids: readonly number[], stopStrings: readonly string[]): string {
  const text = tokenizer.decode([...ids], { skipSpecialTokens: true });
  const cuts = stopStrings.map((s) => text.indexOf(s)).filter((i) => i >= 0);
  return cuts.length > 0 ? text.slice(0, Math.min(...cuts)) : text;
}

/** A value as a refusal shows it: strings quoted and cut to 80 characters. */
function shown(v: unknown): string {
  const text = typeof v === 'string' ? JSON.stringify(v) : String(v);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

/**
 * Checks agent `agent`'s step `step` (`records` in its publishing order, `metrics` its sampling metrics) against this
 * agent's own records of the same step (`own`: the same prompts, drawn from the same seed), `partner`'s settings and
 * the run's `rewards`; throws BadRecord naming the first failure.
 */
export async function checkPartnerStep(
  agent: string,
  step: number,
  records: readonly SampleRecord[],
  metrics: StepMetrics,
  own: readonly Pick<SampleRecord, 'group' | 'prompt' | 'gold'>[],
  partner: PartnerSettings,
  rewards: readonly WeightedReward[],
): Promise<void> {
  const refuse = (at: string, field: string, value: unknown, why: string): BadRecord =>
    new BadRecord(`refused agent ${agent}'s records of step ${step}: ${at} ${field} = ${shown(value)}: ${why}`);
  const accuracy = metrics.accuracy;
  if (accuracy !== undefined && !(accuracy >= 0 && accuracy <= 1))
    throw refuse('its metrics', 'accuracy', accuracy, 'an accuracy lies in [0, 1]');
  const drawn = new Map(own.map((r) => [r.group, r]));
  const perGroup = new Map<number, number>();
  for (const [i, r] of records.entries()) {
    const at = `record ${i}`;
    perGroup.set(r.group, (perGroup.get(r.group) ?? 0) + 1);
    const mine = drawn.get(r.group);
    if (mine === undefined) throw refuse(at, 'group', r.group, 'this agent drew no such prompt this step');
    if (r.prompt !== mine.prompt)
      throw refuse(at, 'prompt', r.prompt, `this step's prompt ${r.group} is ${shown(mine.prompt)}`);
    if (r.gold !== mine.gold)
      throw refuse(at, 'gold', r.gold, `this step's gold answer ${r.group} is ${shown(mine.gold)}`);
    if (r.tokens.response.length > partner.maxNewTokens)
      throw refuse(at, 'response length', r.tokens.response.length, `over its maxNewTokens (${partner.maxNewTokens})`);
    const low = r.generatorLogProbs.find((lp) => !(lp >= LOG_PROB_FLOOR));
    if (low !== undefined) throw refuse(at, 'generatorLogProbs', low, `below the floor of ${LOG_PROB_FLOOR} nats`);
    const text = sampledText(partner.tokenizer, r.tokens.response, partner.stopStrings);
    if (r.text !== text) throw refuse(at, 'text', r.text, `its response ids decode to ${shown(text)}`);
  }
  for (const [group, n] of perGroup)
    if (n !== partner.groupSize)
      throw refuse(`prompt ${group}`, 'responses', n, `its group size is ${partner.groupSize}`);
  const scored = await scoreSamples(
    records.map((r) => ({ prompt: r.prompt, response: r.text, gold: r.gold })),
    rewards,
  );
  for (const [i, r] of records.entries()) {
    const s = scored.scores[i]!;
    if (r.reward !== s.total) throw refuse(`record ${i}`, 'reward', r.reward, `the run's rewards give ${s.total}`);
    const parts = JSON.stringify(s.values);
    if (JSON.stringify(r.rewardParts) !== parts)
      throw refuse(`record ${i}`, 'rewardParts', JSON.stringify(r.rewardParts), `the run's rewards give ${parts}`);
  }
}
