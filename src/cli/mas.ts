/**
 * `hacrl mas rollout`: one batch of multi-agent rollouts with real models (no training) — tree-sampled by default —
 * to see prompts, responses, rewards, groups and the group filter on real generations. Policies are checkpoints
 * (--model NAME=DIR, or DIR for the shared policy) or, without any, a freshly initialised small agent whose character
 * tokenizer is fitted to the workflow's text, optionally warm-started by SFT on solver rows.
 */
import { writeFile } from 'node:fs/promises';
import { Command, InvalidArgumentError } from 'commander';
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { loadPretrained, type BaseModels } from '../model/pretrained.js';
import { AgentSpecSchema } from '../model/agent-spec.js';
import { WarmStartSchema, workflowAgent } from '../agents/workflow-agent.js';
import { PRECISIONS, type Precision } from '../tensor/bf16.js';
import { checkWritableFile } from '../util/fs-errors.js';
import { parseWith } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import { modelPolicy } from '../workflows/model-policy.js';
import type { Policy } from '../workflows/policy.js';
import { keptGroupKeys, playStep, successRate, type PlayedStep } from '../workflows/play.js';
import { workflowOf } from '../workflows/registry.js';
import type { MasBatch } from '../workflows/samples.js';
import { parseWorkflowConfig, type WorkflowConfig } from '../workflows/workflow-config.js';
import type { Workflow } from '../workflows/workflow.js';
import { checkPrecisionRuns, precisionOption } from './precision.js';

/** Options of `hacrl mas rollout`. */
export const MasRolloutSchema = z
  .object({
    /** The `workflow` config section (see docs/at-grpo.md); default plan-path with its defaults. */
    workflow: z.record(z.string(), z.unknown()).default({}),
    /** Instances in the batch; default 4, at most 4096. */
    instances: z
      .number()
      .int()
      .positive()
      .max(4096, '--instances is at most 4096 (one rollout batch holds them all)')
      .default(4),
    /** Seed of the first instance (instances seed, seed+1, …) and of the sampling RNG; default 0. */
    seed: z.number().int().default(0),
    /** Checkpoint folder per policy name ('shared' when no name is given); default none: a fresh agent. */
    models: z.record(z.string(), z.string()).default({}),
    /**
     * Precision of the checkpoints' products, as agents[].precision (src/cli/precision.ts); default fp32. bf16 needs
     * checkpoints: the fresh agent is built and warm-started at fp32.
     */
    precision: z.enum(PRECISIONS).default('fp32'),
    /** The fresh agent's architecture and size, when no checkpoint is given. */
    agent: AgentSpecSchema.prefault({}),
    /**
     * Warm start of the fresh agent before the rollout: SFT steps on solver rows (warm-start.ts) from instances
     * disjoint from the rollout's (seeds from 1,000,000 on); default 0 steps (an untrained agent).
     */
    warmStart: WarmStartSchema.prefault({}),
    /** Where to write the samples as JSONL; default nowhere. */
    out: z.string().optional(),
  })
  .strict();
/** Options as passed (defaults not yet filled in). */
export type MasRolloutOptions = z.input<typeof MasRolloutSchema>;

/** What a rollout batch amounts to, per role and overall. */
export interface MasRolloutSummary {
  workflow: string;
  sampling: string;
  /** The group size K. */
  groupSize: number;
  samples: number;
  episodes: number;
  /** Episodes solved / episodes (a cut-off at maxTurns is not a success). */
  successRate: number;
  /** Per role: samples, fraction parsed, mean reward, own and team parts, sandbox outcomes. */
  roles: Record<
    string,
    { samples: number; parsed: number; reward: number; own: number; team: number; sandbox: Record<string, number> }
  >;
  groups: number;
  /**
   * Groups kept and dropped by the configured group filter, in all and per policy: each policy's groups are ranked
   * among its own, as in training, so these are the groups a training step on the same instances would train.
   */
  filter: GroupCounts & { policies: Record<string, GroupCounts> };
}

/** Groups the filter kept and dropped. */
export interface GroupCounts {
  kept: number;
  droppedLowMean: number;
}

/** A rollout batch: its summary, the batch, and the keys of the groups kept by the filter, in group order. */
export interface MasRollout {
  summary: MasRolloutSummary;
  batch: MasBatch;
  kept: string[];
}

/** Runs one rollout batch and returns its summary, the batch itself and the kept groups' keys. */
export async function runMasRollout(raw: MasRolloutOptions): Promise<MasRollout> {
  const o = parseWith(MasRolloutSchema, raw, 'mas rollout options');
  checkPrecisionRuns(o.precision);
  if (o.precision !== 'fp32' && Object.keys(o.models).length === 0)
    throw new Error(
      `--precision ${o.precision} applies to checkpoints: pass --model DIR, or drop it (the fresh agent runs at fp32)`,
    );
  // Checked before any work: a bad --out must not cost the rollout.
  if (o.out !== undefined) await checkWritableFile(o.out, '--out');
  const config = parseWorkflowConfig(o.workflow);
  const wf = workflowOf(config);
  const k = engine();
  const rng = new Rng(o.seed);
  const policies: Record<string, Policy> = {};
  // Adapter folders on one base share it, loaded once.
  const bases: BaseModels = new Map();
  const needed = [...new Set(wf.roles.map((r) => r.policy))];
  for (const name of needed) {
    const dir = o.models[name];
    if (dir !== undefined) {
      const { model, tokenizer } = await loadPretrained(dir, bases, { precision: o.precision });
      policies[name] = modelPolicy(model, tokenizer, k, rng, `policy ${name} (${dir})`);
    } else if (Object.keys(o.models).length === 0) {
      policies[name] = await freshPolicy(o, wf, k, rng);
    } else throw new Error(`no checkpoint for policy "${name}": pass --model ${name}=DIR`);
  }
  const seeds = Array.from({ length: o.instances }, (_, i) => o.seed + i);
  const played = await playRollout(wf, config, policies, seeds);
  if (o.out) await writeFile(o.out, played.batch.samples.map((s) => JSON.stringify(s)).join('\n') + '\n');
  return played;
}

/** Plays one batch of `wf` on the instances of `seeds` with `policies` by name, as a training step does; no files. */
export async function playRollout(
  wf: Workflow<unknown>,
  config: WorkflowConfig,
  policies: Readonly<Record<string, Policy>>,
  seeds: readonly number[],
): Promise<MasRollout> {
  const step = await playStep(wf, config, policies, seeds);
  return { summary: summarize(wf.name, config, step), batch: step.batch, kept: keptGroupKeys(step) };
}

/** A fresh agent whose character vocabulary covers the workflow's prompts (from solver episodes) and printable ASCII. */
async function freshPolicy(
  o: z.output<typeof MasRolloutSchema>,
  wf: ReturnType<typeof workflowOf>,
  k: ReturnType<typeof engine>,
  rng: Rng,
): Promise<Policy> {
  const { model, tokenizer } = await workflowAgent(wf, o.agent, o.warmStart, o.seed, k);
  return modelPolicy(model, tokenizer, k, rng);
}

/** Per-role and overall numbers of a step. */
function summarize(workflow: string, config: WorkflowConfig, step: PlayedStep): MasRolloutSummary {
  const { batch } = step;
  const roles: MasRolloutSummary['roles'] = {};
  for (const name of [...new Set(batch.samples.map((s) => s.role))]) {
    const mine = batch.samples.filter((s) => s.role === name);
    const sandbox: Record<string, number> = {};
    for (const s of mine) if (s.sandbox) sandbox[s.sandbox] = (sandbox[s.sandbox] ?? 0) + 1;
    roles[name] = {
      samples: mine.length,
      parsed: mean(mine.map((s) => (s.parsed ? 1 : 0))),
      reward: mean(mine.map((s) => s.reward)),
      own: mean(mine.map((s) => s.own)),
      team: mean(mine.map((s) => s.team)),
      sandbox,
    };
  }
  const policies = Object.fromEntries(
    [...step.byPolicy].map(([name, p]) => [
      name,
      { kept: p.filter.kept.length, droppedLowMean: p.filter.droppedLowMean.length },
    ]),
  );
  const total = (key: keyof GroupCounts): number => Object.values(policies).reduce((n, p) => n + p[key], 0);
  return {
    workflow,
    sampling: config.sampling,
    groupSize: config.groupSize,
    samples: batch.samples.length,
    episodes: batch.episodes.length,
    successRate: successRate(batch),
    roles,
    groups: step.groups.length,
    filter: { kept: total('kept'), droppedLowMean: total('droppedLowMean'), policies },
  };
}

/** `NAME=DIR` or `DIR` (the shared policy) → the models map. */
export function parseModelArgs(args: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const a of args) {
    const eq = a.indexOf('=');
    const [name, dir] = eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : ['shared', a];
    if (out[name] !== undefined) throw new Error(`--model: policy "${name}" given twice`);
    out[name] = dir;
  }
  return out;
}

/** A command-line integer ≥ 0. */
function count(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`expected an integer ≥ 0, got "${value}"`);
  return n;
}

/** The value of a `--workflow <json>` option as an object; errors name the option and show an example. */
export function workflowOption(text: unknown): Record<string, unknown> {
  let workflow: unknown;
  try {
    workflow = JSON.parse(String(text));
  } catch (e) {
    throw new Error(`--workflow must be JSON, e.g. '{"name":"sokoban","groupSize":4}': ${(e as Error).message}`);
  }
  if (typeof workflow !== 'object' || workflow === null || Array.isArray(workflow))
    throw new Error(`--workflow must be a JSON object, e.g. '{"name":"sokoban","groupSize":4}', not ${String(text)}`);
  return workflow as Record<string, unknown>;
}

/** `hacrl mas rollout …` as a commander command (main.ts adds it with program.addCommand(masCommand())). */
export function masCommand(print: (line: string) => void = console.log): Command {
  const mas = new Command('mas').description('multi-agent workflows (AT-GRPO): environments, roles, tree sampling');
  mas
    .command('rollout')
    .description('one batch of multi-agent rollouts with real models, no RL: samples, rewards, groups, group filter')
    .option('--workflow <json>', 'the workflow config section as JSON (see docs/at-grpo.md)', '{}')
    .option('--instances <n>', 'instances in the batch', count, 4)
    .option('--seed <n>', 'seed of the first instance and of sampling', count, 0)
    .option('--model <dir...>', 'checkpoint per policy, NAME=DIR or DIR (shared); default a fresh small agent', [])
    .option('--hidden <n>', 'width of the fresh agent', count, 64)
    .option('--layers <n>', 'blocks of the fresh agent', count, 2)
    .option('--heads <n>', 'heads of the fresh agent', count, 4)
    .option('--warm-start-steps <n>', 'SFT steps of the fresh agent on solver rows before the rollout', count, 0)
    .option('--out <file>', 'write the samples as JSONL')
    .addOption(precisionOption())
    .action(async (o: Record<string, unknown>) => {
      const { summary } = await runMasRollout({
        workflow: workflowOption(o['workflow']),
        instances: o['instances'] as number,
        seed: o['seed'] as number,
        models: parseModelArgs(o['model'] as string[]),
        agent: {
          hidden: o['hidden'] as number,
          layers: o['layers'] as number,
          heads: o['heads'] as number,
          maxPositions: 2048,
        },
        warmStart: { steps: o['warmStartSteps'] as number },
        precision: o['precision'] as Precision,
        ...(o['out'] === undefined ? {} : { out: String(o['out']) }),
      });
      print(JSON.stringify(summary, null, 2));
    });
  return mas;
}
