/**
 * The memory plan of a run config (src/model/memory-plan.ts) from what is on disk before any weight is read: each
 * agent's config.json, its tokenizer and the training prompts; and the check `hacrl train` and `hacrl agent` make
 * with it before any work, refusing a run that would not fit with what to change.
 */
import { resolve } from 'node:path';
import { bf16Refusal } from '../backend/cpu-features.js';
import type { ResolvedAgent } from '../config/rl-config.js';
import { readHfConfig } from '../model/hf-config.js';
import { tablesStoredBf16 } from '../model/weights.js';
import type { Precision } from '../tensor/bf16.js';
import { adapterMemory, planMemory, type AgentMemoryInput, type MemoryPlan } from '../model/memory-plan.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { renderPrompt, type PromptOptions } from '../tasks/prompt.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import type { MachineMemory } from '../util/memory.js';
import type { ResolvedRun } from './resolved-run.js';
import { GENERATION_BATCH } from './run-source.js';

/** Prompt tokens assumed for a workflow run, whose multi-turn prompts are built while it runs. */
export const WORKFLOW_PROMPT_TOKENS = 512;

/** How the plan's inputs were found. */
export interface RunPlanOptions {
  /** Which agents this process trains (hacrl agent: one); default every agent. */
  local?: (name: string) => boolean;
  /**
   * Longest prompt in tokens for every agent; default measured on data.train (longestPrompt: its MEASURED_QUESTIONS
   * longest questions), WORKFLOW_PROMPT_TOKENS for workflows.
   */
  promptTokens?: number;
}

/** A run's plan and, per agent, the prompt length it assumed. */
export interface RunPlan {
  plan: MemoryPlan;
  /** Per agent: its longest prompt in tokens and where that figure comes from, and its precision. */
  prompts: {
    agent: string;
    tokens: number;
    source: 'data.train' | 'given' | 'workflow default';
    precision: Precision;
  }[];
}

/**
 * Most distinct training questions tokenized to measure the longest prompt (256). The plan runs on every
 * `hacrl train`, `agent`, `plan` and `config resolve`, once per agent: tokenizing a whole large data set each time
 * would cost seconds to minutes for a figure that only needs the longest prompts.
 */
export const MEASURED_QUESTIONS = 256;

/**
 * The longest rendered prompt in tokens of `tokenizer` among the `limit` longest distinct questions by UTF-8 length
 * (all of them when there are no more than `limit`: then it is exact). Why the longest in bytes: character and
 * byte-level BPE tokenizers never give a text more tokens than its UTF-8 bytes, and the template adds about the same
 * tokens to every question, so a question left out is shorter than every measured one and could only have more tokens
 * than all of them by a tokenization denser than theirs. Ties in length keep the data's order (deterministic).
 */
export function longestPrompt(
  tokenizer: Pick<Tokenizer, 'encode' | 'chatTemplate' | 'applyChatTemplate'>,
  questions: readonly string[],
  prompt: PromptOptions,
  limit = MEASURED_QUESTIONS,
): number {
  const measured = [...new Set(questions)]
    .map((q) => ({ q, bytes: Buffer.byteLength(q, 'utf8') }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, limit);
  let longest = 1;
  for (const { q } of measured)
    longest = Math.max(longest, tokenizer.encode(renderPrompt(tokenizer, q, prompt)).length);
  return longest;
}

/** The longest rendered training prompt of `agent` in its own tokens (longestPrompt). */
async function agentLongestPrompt(agent: ResolvedAgent, questions: readonly string[]): Promise<number> {
  const tokenizer = await loadTokenizer(agent.checkpoint);
  const prompt = { template: agent.template, ...(agent.system === undefined ? {} : { system: agent.system }) };
  return longestPrompt(tokenizer, questions, prompt);
}

/** What the plan reads of a resolved run. */
type PlanInputs = Pick<ResolvedRun, 'agents' | 'source' | 'recipe' | 'promptsPerStep'>;

/**
 * The memory plan of `run` from each agent's config.json, weight file headers and tokenizer and the training data (no
 * weights read).
 * Rollouts shared between agents (hacpo, naive) make every learner train on all agents' sequences.
 */
export async function planRun(run: PlanInputs, o: RunPlanOptions = {}): Promise<RunPlan> {
  const { agents, source, recipe } = run;
  const questions =
    o.promptTokens === undefined && source.kind === 'rollout'
      ? (await loadDataSpec(source.train)).problems.map((p) => p.prompt)
      : [];
  const prompts: RunPlan['prompts'] = [];
  for (const a of agents) {
    const { precision } = a;
    if (o.promptTokens !== undefined)
      prompts.push({ agent: a.name, tokens: o.promptTokens, source: 'given', precision });
    else if (source.kind === 'workflow')
      prompts.push({ agent: a.name, tokens: WORKFLOW_PROMPT_TOKENS, source: 'workflow default', precision });
    else
      prompts.push({ agent: a.name, tokens: await agentLongestPrompt(a, questions), source: 'data.train', precision });
  }
  const shared = recipe.sharing !== 'none';
  const sequences = agents.map((a) => run.promptsPerStep * a.groupSize);
  const everyone = sequences.reduce((n, s) => n + s, 0);
  const local = (name: string): boolean => o.local?.(name) ?? true;
  const owners = baseOwners(agents.filter((a) => local(a.name)));
  // A workflow takes its old log-probs from the training pass (optim.oldLogProbs 'sampler' is refused there).
  const scoring = source.kind === 'workflow' || source.oldLogProbs === 'learner' || recipe.kl !== null;
  const inputs: AgentMemoryInput[] = await Promise.all(
    agents.map(async (a, i) => ({
      name: a.name,
      cfg: await readHfConfig(a.checkpoint),
      ...(await loraInputs(a, owners.get(a.name))),
      local: local(a.name),
      // A LoRA agent's KL reference is its base without the adapters: no copy.
      reference: recipe.kl !== null && a.lora === null,
      scores: scoring,
      precision: a.precision,
      tablesBf16: a.precision === 'bf16' && (await tablesStoredBf16(a.checkpoint)),
      sequences: sequences[i]!,
      generationBatch: GENERATION_BATCH,
      promptTokens: prompts[i]!.tokens,
      maxNewTokens: a.maxNewTokens,
      trainSequences: shared ? everyone : sequences[i]!,
      miniBatches: recipe.miniBatches,
      checkpointing: recipe.activationCheckpointing === true,
    })),
  );
  return { plan: planMemory(inputs), prompts };
}

/**
 * For each LoRA agent of `agents` (those this process trains) after the first on the same base folder and precision,
 * that first agent's name: src/train/learners.ts loads one frozen base per folder and precision, so the plan counts
 * its weights once.
 */
function baseOwners(agents: readonly ResolvedAgent[]): Map<string, string> {
  const first = new Map<string, string>();
  const owners = new Map<string, string>();
  for (const a of agents) {
    if (a.lora === null) continue;
    const base = `${a.precision}:${resolve(a.checkpoint)}`;
    const owner = first.get(base);
    if (owner === undefined) first.set(base, a.name);
    else owners.set(a.name, owner);
  }
  return owners;
}

/** What a LoRA agent adds to the plan (nothing for a whole model); `owner` when it shares another agent's base. */
async function loraInputs(
  a: ResolvedAgent,
  owner: string | undefined,
): Promise<Pick<AgentMemoryInput, 'adapters' | 'sharesWeightsWith'>> {
  if (a.lora === null) return {};
  return {
    adapters: adapterMemory(await readHfConfig(a.checkpoint), a.lora),
    ...(owner === undefined ? {} : { sharesWeightsWith: owner }),
  };
}

/** Bytes as GiB with two decimals. */
export function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
}

/**
 * The refusal of a run whose plan exceeds the machine's available memory, naming its biggest parts and what to
 * change; null when it fits.
 */
export function memoryRefusal(plan: MemoryPlan, machine: MachineMemory): string | null {
  if (plan.total <= machine.available) return null;
  const peak = plan.peakPhase;
  const counted = plan.agents.flatMap((a) =>
    a.parts
      .filter((p) => p.held === 'run' || (peak && a.name === peak.agent && p.held === peak.name))
      .map((p) => ({
        ...p,
        agent: a.name,
      })),
  );
  const biggest = counted
    .sort((x, y) => y.bytes - x.bytes)
    .slice(0, 3)
    .map((p) => `${p.name} of ${p.agent} ${gib(p.bytes)}${p.held === 'run' ? '' : ` (while ${p.held})`}`);
  const available = machine.limitFromEnv ? 'HACRL_MEMORY_LIMIT_BYTES allows' : 'the machine has available';
  return (
    `this run needs an estimated ${gib(plan.total)} at its peak and ${available} ${gib(machine.available)} ` +
    `(hacrl plan shows every part); the biggest: ${biggest.join(', ')}. To fit: train LoRA adapters instead of ` +
    'every weight (gradients and AdamW state shrink to the adapters), sample fewer prompts ' +
    '(rollout.promptsPerStep) or samples (rollout.groupSize), shorten rollout.maxNewTokens, set ' +
    'optim.activationCheckpointing: true, or raise optim.miniBatches; --skip-memory-check runs it anyway'
  );
}

/**
 * Why this machine cannot compute the products of the bf16 agents among `agents` with `backend` (default the one
 * selected, HACRL_BACKEND) on a CPU with `flags` (default this one's), or null: checked before any weight is read.
 */
export function precisionRefusal(
  agents: readonly ResolvedAgent[],
  backend?: string,
  flags?: ReadonlySet<string>,
): string | null {
  const bf16 = agents.filter((a) => a.precision === 'bf16').map((a) => a.name);
  const why = bf16.length > 0 ? bf16Refusal(backend, flags) : null;
  return why && `precision bf16 (agent${bf16.length > 1 ? 's' : ''} ${bf16.join(', ')}): ${why}`;
}

/**
 * Plans `run` and throws memoryRefusal's message when it does not fit in `machine`; returns the verdict a run prints
 * at its start, e.g. `plan: fits, an estimated 7.91 GiB at its peak of 21.40 GiB available`.
 */
export async function checkRunFits(run: PlanInputs, machine: MachineMemory, o: RunPlanOptions = {}): Promise<string> {
  const { plan } = await planRun(run, o);
  const refusal = memoryRefusal(plan, machine);
  if (refusal) throw new Error(refusal);
  return `plan: fits, an estimated ${gib(plan.total)} at its peak of ${gib(machine.available)} available`;
}
