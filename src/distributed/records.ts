/**
 * What one agent publishes per step: its sample records as plain data (text, its own token ids, its pre-update
 * log-probs, rewards, flags; the rewards feed every partner's P̂, Eq. 9) and its sampling metrics. Everything
 * read from the broker is validated here before the trainer sees it: a record that fails is rejected naming the agent
 * and the step.
 */
import { z } from 'zod';
import type { StepMetrics } from '../train/sample-sources.js';
import { SampleSchema, type SampleRecord } from '../train/sample-table.js';
import { mean } from '../util/stats.js';
import { BadRecord } from './record-checks.js';

/**
 * One record as it travels: the sample's fields that single-turn rollouts fill, less its place in the table (the
 * receiver numbers records as one process would) and the sampling log-probs (only the generator's own learner reads
 * them).
 */
const WireRecordSchema = SampleSchema.pick({
  generator: true,
  role: true,
  group: true,
  prompt: true,
  gold: true,
  text: true,
  tokens: true,
  generatorLogProbs: true,
  reward: true,
  rewardParts: true,
  truncated: true,
  stoppedByEos: true,
});

/** The fields that travel, in the schema's order. */
const WIRE_FIELDS = Object.keys(WireRecordSchema.shape) as (keyof z.output<typeof WireRecordSchema>)[];

/** The fields of every version of a step as it travels. */
const STEP_FIELDS = {
  format: z.literal('hacrl-step'),
  run: z.string(),
  step: z.number().int().min(1),
  agent: z.string(),
  // JSON has no NaN: a metric that was NaN (e.g. a mean over nothing) arrives as null.
  metrics: z.record(z.string(), z.number().nullable()),
  records: z.array(WireRecordSchema),
};

/**
 * One agent's step as it travels: version 2 (lockstep), or version 3 (exchange.mode async) that adds the generator's
 * capability history — its per-step P_t (HACRL Eq. 9) of its last K steps, oldest first, this step's last — so a
 * reader takes the P̂ of the version that sampled the records, not the partner's latest.
 */
const StepPayloadSchema = z.discriminatedUnion('version', [
  z.strictObject({ ...STEP_FIELDS, version: z.literal(2) }),
  z.strictObject({ ...STEP_FIELDS, version: z.literal(3), capability: z.array(z.number()).min(1) }),
]);

/** One agent's records of one step and its sampling metrics. */
export interface AgentStep {
  records: SampleRecord[];
  metrics: StepMetrics;
  /** Version 3: its generator's capability history when it sampled them (P_t per step, oldest first). */
  capability?: number[];
}

/**
 * The bytes agent `agent` publishes for step `step` of run `run`: its own records (generator === agent) and its
 * sampling metrics without wall times; with `capability` (its P_t history, this step's last) a version-3 payload.
 */
export function encodeStep(
  run: string,
  step: number,
  agent: string,
  records: readonly SampleRecord[],
  metrics: StepMetrics,
  capability?: readonly number[],
): Uint8Array {
  const wire = records.map((r) => Object.fromEntries(WIRE_FIELDS.map((k) => [k, r[k]])));
  // Wall times differ between a run and its restart; the rest of a step is a function of the config and seeds, so a
  // republished step is byte-equal to the first (the transport tells a restart from another run by that).
  const steady = Object.fromEntries(Object.entries(metrics).filter(([k]) => !k.startsWith('time_')));
  const payload =
    capability === undefined
      ? { format: 'hacrl-step', version: 2, run, step, agent, metrics: steady, records: wire }
      : { format: 'hacrl-step', version: 3, run, step, agent, metrics: steady, records: wire, capability };
  return new TextEncoder().encode(JSON.stringify(payload));
}

/** What a record of `agent` must satisfy beyond its schema. */
export interface StepLimits {
  /** Prompt groups in a step (rollout.promptsPerStep). */
  groups: number;
  /** The agent's responses per prompt (its groupSize). */
  groupSize: number;
  /** Its vocabulary size: every token id lies below it. */
  vocabSize: number;
}

/** Decodes and checks agent `agent`'s step `step` of run `run`; throws naming the agent, the step and what is wrong. */
export function decodeStep(run: string, step: number, agent: string, bytes: Uint8Array, limits: StepLimits): AgentStep {
  const reject = (why: string): BadRecord => new BadRecord(`refused agent ${agent}'s records of step ${step}: ${why}`);
  const json = parseJson(bytes);
  if (json instanceof Error) throw reject(`not JSON (${json.message})`);
  const parsed = StepPayloadSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw reject(`${issue.path.join('.') || 'payload'}: ${issue.message}`);
  }
  const p = parsed.data;
  if (p.run !== run || p.step !== step || p.agent !== agent)
    throw reject(`it says run ${p.run}, step ${p.step}, agent ${p.agent}`);
  if (p.records.length !== limits.groups * limits.groupSize)
    throw reject(`${p.records.length} records, expected ${limits.groups} prompts × ${limits.groupSize} responses`);
  const records = p.records.map((w, i): SampleRecord => {
    const at = `record ${i}`;
    if (w.generator !== agent || w.role !== agent) throw reject(`${at} is generated by ${w.generator} as ${w.role}`);
    if (w.group >= limits.groups) throw reject(`${at}: group ${w.group} of ${limits.groups}`);
    const { prompt, response } = w.tokens;
    const outside = [...prompt, ...response].find((id) => id >= limits.vocabSize);
    if (outside !== undefined) throw reject(`${at}: token id ${outside} outside the vocabulary (${limits.vocabSize})`);
    if (w.generatorLogProbs.length !== response.length)
      throw reject(`${at}: ${response.length} response tokens, ${w.generatorLogProbs.length} log-probs`);
    return { id: i, episode: i, ...w };
  });
  const metrics = Object.fromEntries(Object.entries(p.metrics).map(([k, v]) => [k, v ?? NaN]));
  if (p.version === 2) return { records, metrics };
  // This step's P_t is the mean reward of the records themselves (Eq. 9): recomputed, not trusted.
  const pT = mean(records.map((r) => r.reward));
  if (p.capability.at(-1) !== pT)
    throw reject(`capability ${p.capability.at(-1)} for this step, its records' mean reward is ${pT}`);
  if (p.capability.some((v) => !Number.isFinite(v))) throw reject('a capability value is not finite');
  return { records, metrics, capability: p.capability };
}

/** One agent's fingerprint of the run as it travels (step 0 of its subject). */
const HelloSchema = z.strictObject({
  format: z.literal('hacrl-hello'),
  version: z.literal(1),
  run: z.string(),
  agent: z.string(),
  fingerprint: z.record(z.string(), z.string()),
});

/** The bytes agent `agent` publishes before its first step: its machine's fingerprint of run `run`. */
export function encodeHello(run: string, agent: string, fingerprint: Record<string, string>): Uint8Array {
  const payload = { format: 'hacrl-hello', version: 1, run, agent, fingerprint };
  return new TextEncoder().encode(JSON.stringify(payload));
}

/** Decodes agent `agent`'s fingerprint of run `run`; throws naming the agent and what is wrong. */
export function decodeHello(run: string, agent: string, bytes: Uint8Array): Record<string, string> {
  const json = parseJson(bytes);
  if (json instanceof Error) throw new Error(`agent ${agent}'s fingerprint is not JSON (${json.message})`);
  const parsed = HelloSchema.safeParse(json);
  if (!parsed.success || parsed.data.run !== run || parsed.data.agent !== agent)
    throw new Error(`agent ${agent}'s fingerprint of run ${run} is malformed or names another run or agent`);
  return parsed.data.fingerprint;
}

/** `bytes` as UTF-8 JSON, or the error that says why they are not. */
function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown;
  } catch (e) {
    return e as Error;
  }
}
