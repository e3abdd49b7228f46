/**
 * Rewards for RL with verifiable answers: the reward function interface, math correctness and format rewards, their
 * weighted combination, and batch scoring in which a failing reward costs one sample one value, never the run.
 */
import { extractAnswer, extractBoxed, RESPONSE_EXTRACT, type ExtractOptions } from './extract.js';
import { verify, type VerifyOptions } from './math-equal.js';

/** One sample to score. */
export interface Sample {
  prompt: string;
  response: string;
  /** The gold answer (a bare answer, `#### 18`, or a solution with `\boxed{}`). */
  gold: string;
  meta?: Record<string, unknown>;
}

/** A reward: a finite number per sample (sync or async). Throwing or returning a non-finite number marks a failure. */
export type RewardFn = (sample: Sample) => number | Promise<number>;

/** A reward with its name (unique in a combination) and weight in the total. */
export interface WeightedReward {
  name: string;
  fn: RewardFn;
  weight: number;
}

/** Thrown by a reward when the sample cannot be scored at all (e.g. its gold is unparseable): the sample is skipped. */
export class RewardSkip extends Error {
  override name = 'RewardSkip';
}

/** Options of the math correctness reward. */
export interface MathRewardOptions extends VerifyOptions {
  /** How to find the answer in the response; default RESPONSE_EXTRACT (the last `\boxed{}` only). */
  extract?: ExtractOptions;
}

/**
 * 1 when the answer extracted from the response equals the gold, else 0 (also when no answer is found). An
 * unparseable gold throws RewardSkip; a verifier time-out or failure throws, so it is counted as a failure.
 */
export function mathReward(opts: MathRewardOptions = {}): RewardFn {
  const { extract = RESPONSE_EXTRACT, ...verifyOpts } = opts;
  return async (s) => {
    const answer = extractAnswer(s.response, extract);
    if (answer === null) return 0;
    const r = await verify(s.gold, answer, verifyOpts);
    if (r.equal !== null) return r.equal ? 1 : 0;
    const why = `verifier: ${r.reason}${r.detail ? ` (${r.detail})` : ''}`;
    throw r.reason === 'unparseable-gold' ? new RewardSkip(why) : new Error(why);
  };
}

/** Options of the format reward. */
export interface FormatRewardOptions {
  /** 1 when the response matches this; default: exactly one `\boxed{…}`, closed. */
  pattern?: RegExp;
}

/** 1 when the response has the expected format (default: exactly one closed `\boxed{…}`), else 0. */
export function formatReward(opts: FormatRewardOptions = {}): RewardFn {
  const { pattern } = opts;
  return (s) => {
    if (pattern) {
      pattern.lastIndex = 0; // a /g or /y pattern keeps state between calls
      return pattern.test(s.response) ? 1 : 0;
    }
    const boxes = s.response.match(/\\boxed(?![A-Za-z])/g)?.length ?? 0;
    return boxes === 1 && extractBoxed(s.response) !== null ? 1 : 0;
  };
}

/** Counts for one reward over the samples scored so far. */
export interface RewardStats {
  name: string;
  /** Samples this reward was asked to score. */
  calls: number;
  /** Calls that threw or returned a non-finite number (scored 0). */
  failures: number;
  /** Calls that threw RewardSkip (sample skipped). */
  skipped: number;
  /** The first failure's message, for the report. */
  firstError: string | null;
}

/** One sample's scores. */
export interface SampleScore {
  /** Σ weight · value over the rewards (failed rewards count 0). */
  total: number;
  /** Each reward's value by name (0 for a failed or skipped reward). */
  values: Record<string, number>;
  /** Names of the rewards that failed on this sample. */
  failed: string[];
  /** True when a reward threw RewardSkip: the sample has no valid score and should be left out. */
  skipped: boolean;
}

/** A scorer built by combineRewards: scores one sample, and counts failures into its stats. */
export interface CombinedReward {
  (sample: Sample): Promise<SampleScore>;
  /** Per-reward counts so far, in the order given. */
  readonly stats: RewardStats[];
}

/** Runs one reward, turning a throw or a non-finite value into a counted failure. */
async function runOne(r: WeightedReward, sample: Sample, st: RewardStats): Promise<number | Error> {
  st.calls++;
  try {
    const v = await r.fn(sample);
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    throw new Error(`returned ${typeof v === 'number' ? String(v) : typeof v}, not a finite number`);
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    if (err instanceof RewardSkip) st.skipped++;
    else st.failures++;
    st.firstError ??= `${r.name}: ${err.message}`;
    return err;
  }
}

/** Weighted combination: the returned scorer gives the total and each reward's value, counting failures. */
export function combineRewards(rewards: readonly WeightedReward[]): CombinedReward {
  const names = new Set(rewards.map((r) => r.name));
  if (names.size !== rewards.length) throw new Error('reward names must be unique');
  const stats: RewardStats[] = rewards.map((r) => ({
    name: r.name,
    calls: 0,
    failures: 0,
    skipped: 0,
    firstError: null,
  }));
  const score = async (sample: Sample): Promise<SampleScore> => {
    const out: SampleScore = { total: 0, values: {}, failed: [], skipped: false };
    const got = await Promise.all(rewards.map((r, i) => runOne(r, sample, stats[i]!)));
    for (const [i, r] of rewards.entries()) {
      const v = got[i]!;
      if (v instanceof Error) {
        out.values[r.name] = 0;
        if (v instanceof RewardSkip) out.skipped = true;
        else out.failed.push(r.name);
      } else {
        out.values[r.name] = v;
        out.total += r.weight * v;
      }
    }
    return out;
  };
  return Object.assign(score, { stats });
}

/** Options of scoreSamples. */
export interface ScoreOptions {
  /** Samples scored at once (lets async rewards such as the symbolic checker overlap); default 8. */
  concurrency?: number;
}

/** Scores every sample with the weighted rewards; failures are scored 0 and counted, and scoring goes on. */
export async function scoreSamples(
  samples: readonly Sample[],
  rewards: readonly WeightedReward[],
  opts: ScoreOptions = {},
): Promise<{ scores: SampleScore[]; stats: RewardStats[] }> {
  const combined = combineRewards(rewards);
  const scores: SampleScore[] = new Array<SampleScore>(samples.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let i = next++; i < samples.length; i = next++) scores[i] = await combined(samples[i]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 8) }, lane));
  return { scores, stats: combined.stats };
}
