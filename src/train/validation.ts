/**
 * Validation during training: each agent's greedy accuracy on every validation set and, with k samples per problem,
 * avg@k and pass@k beside it, as metric-row fields.
 */
import { engine } from '../backend/engine.js';
import type { ResolvedAgent } from '../config/rl-config.js';
import { evaluate } from '../eval/evaluate.js';
import type { Agent } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import type { PhaseStart } from './step-watch.js';

/** A named validation data set. */
export interface ValidationSet {
  name: string;
  problems: Problem[];
}

/** How to validate. */
export interface ValidationOptions {
  /** Problems per set, the first ones (0 = all). */
  problems: number;
  /** Samples per problem k for avg@k and pass@k (0 = greedy only). */
  samplesPerProblem: number;
  /** Seed of the k samples: the same at every validation, so that differences between steps are the model's. */
  seed: number;
}

/**
 * The metric fields of one validation, flat and in [0, 1]: `val/<set>/greedy` (greedy accuracy) and, with k samples
 * per problem, `val/<set>/avg@k` and `val/<set>/pass@k`.
 */
export type ValidationMetrics = Record<`val/${string}`, number>;

/** How an agent is prompted and sampled when validated: its training prompt, length limit, temperature, top-p, top-k. */
export type ValidationSettings = Pick<
  ResolvedAgent,
  'maxNewTokens' | 'template' | 'system' | 'temperature' | 'topP' | 'topK'
>;

/**
 * The metric fields of one validation of `agent` on every set (see ValidationMetrics), the k samples drawn with the
 * agent's training temperature, top-p and top-k; `phase` names each set's validation for the live progress line.
 */
export async function validateAgent(
  agent: Agent,
  settings: ValidationSettings,
  sets: readonly ValidationSet[],
  o: ValidationOptions,
  phase?: PhaseStart,
): Promise<ValidationMetrics> {
  const out: ValidationMetrics = {};
  const k = o.samplesPerProblem;
  for (const d of sets) {
    const problems = o.problems > 0 ? d.problems.slice(0, o.problems) : d.problems;
    phase?.('validating', `${agent.name} on ${d.name}`, problems.length * (1 + k));
    const report = await evaluate(agent.model, engine(), agent.tokenizer, problems, {
      maxNewTokens: settings.maxNewTokens,
      prompt: { template: settings.template, ...(settings.system === undefined ? {} : { system: settings.system }) },
      k,
      temperature: settings.temperature,
      topP: settings.topP,
      topK: settings.topK,
      seed: o.seed,
      name: `agent ${agent.name} validating on ${d.name}`,
    });
    out[`val/${d.name}/greedy`] = report.greedy.value;
    if (report.avgAtK && report.passAtK) {
      out[`val/${d.name}/avg@${k}`] = report.avgAtK.value;
      out[`val/${d.name}/pass@${k}`] = report.passAtK.value;
    }
  }
  return out;
}

/** One line for the console: `val easy:test 42.0% (avg@4 35.5%, pass@4 60.0%)`, set by set (greedy first). */
export function formatValidation(m: ValidationMetrics): string {
  const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
  const sets = new Map<string, { greedy?: number; sampled: string[] }>();
  for (const [key, value] of Object.entries(m)) {
    // A set's name may itself hold slashes (a file path): the statistic is the last part.
    const cut = key.lastIndexOf('/');
    const [name, stat] = [key.slice('val/'.length, cut), key.slice(cut + 1)];
    const set = sets.get(name) ?? { sampled: [] };
    if (stat === 'greedy') set.greedy = value;
    else set.sampled.push(`${stat} ${pct(value)}`);
    sets.set(name, set);
  }
  const parts = [...sets].map(
    ([name, s]) =>
      `${name} ${s.greedy === undefined ? '-' : pct(s.greedy)}${s.sampled.length ? ` (${s.sampled.join(', ')})` : ''}`,
  );
  return `val ${parts.join('  ')}`;
}
