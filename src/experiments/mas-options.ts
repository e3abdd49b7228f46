/** The options of `hacrl bench mas`: environments, seeds, sizes, the agent and its warm start, ablations, work folder. */
import { z } from 'zod';
import { ADVANTAGE_ESTIMATOR_NAMES } from '../algorithms/advantages.js';
import { WarmStartSchema, type WarmStart } from '../agents/workflow-agent.js';
import { AgentSpecSchema, type AgentSpec } from '../model/agent-spec.js';
import { parseWith } from '../util/json-file.js';

/**
 * The ablation arms (`--ablations`): AT-GRPO shared with one thing changed — workflow.grouping 'agent' (turns pooled)
 * or 'turn' (roles pooled), sampling 'no-tree', or the group filter flipped (off when the environment's section has it
 * on, else the spec's 0.5): each is paired with at-grpo-shared.
 */
export const ABLATIONS = ['grouping-agent', 'grouping-turn', 'no-tree', 'group-filter-flipped'] as const;
/** An ablation arm's name. */
export type Ablation = (typeof ABLATIONS)[number];
/** Whether `name` is one of ABLATIONS. */
export const isAblation = (name: string): name is Ablation => (ABLATIONS as readonly string[]).includes(name);

/** Options of `hacrl bench mas`. */
export const BenchMasSchema = z
  .object({
    /** Workflow sections, one per environment; default Plan-Path 5×5 and Sudoku 4×4 with few blanks. */
    workflows: z.array(z.record(z.string(), z.unknown())).min(1),
    /**
     * Seeds (each: its own training instances, sampling and mini-batch order); 0 builds (or reads) the warm starts and
     * plays them on the held-out instances, no RL — where a warm start lands on this machine; default 3, at most 100.
     */
    seeds: z.number().int().min(0, '--seeds is at least 0').max(100, '--seeds is at most 100').default(3),
    /**
     * The first RL seed: the bench trains seeds firstSeed … firstSeed + seeds − 1, so processes sharing one work folder
     * can each take other seeds (after one has built the warm starts) and a later run reads them all back; default 0.
     */
    firstSeed: z
      .number()
      .int()
      .min(0, '--first-seed is at least 0')
      .max(10_000, '--first-seed is at most 10000')
      .default(0),
    /** RL steps of every trained arm; default 10, at most 100000. */
    steps: z.number().int().positive().max(100_000, '--steps is at most 100000'),
    /** Instances per step of the workflow arms (the single agent plays twice as many); default 4, at most 2048. */
    instancesPerStep: z.number().int().positive().max(2048, 'instancesPerStep is at most 2048').default(4),
    /** Held-out instances per seed (greedy, one episode each); default 50, at most 10000. */
    heldOut: z.number().int().positive().max(10_000, 'heldOut is at most 10000').default(50),
    /** Learning rate of the RL arms; default 1e-3. */
    lr: z.number().positive().default(1e-3),
    /** Advantage scaling of the RL arms (optim.advantage); default 'group-std', the spec's (r − mean)/(std + 1e-6). */
    advantage: z.enum(ADVANTAGE_ESTIMATOR_NAMES).default('group-std'),
    agent: AgentSpecSchema.prefault({}),
    warmStart: WarmStartSchema.prefault({}),
    /**
     * Per workflow name: fields of `agent` and `warmStart` that replace the bench's for that environment (a family
     * whose warm start was sized on its own calibration instances); default none.
     */
    perWorkflow: z
      .record(
        z.string(),
        z
          .object({
            agent: z.record(z.string(), z.unknown()).default({}),
            warmStart: z.record(z.string(), z.unknown()).default({}),
          })
          .strict(),
      )
      .default({}),
    /**
     * Also train ablations of AT-GRPO (shared policy, each paired with at-grpo-shared on the same instances): true for
     * all of ABLATIONS (grouping by agent only, by turn only, no-tree sampling, the group filter flipped), or a list of
     * them; default false (none).
     */
    ablations: z.union([z.boolean(), z.array(z.enum(ABLATIONS)).min(1)]).default(false),
    /**
     * Working folder (agents and runs); at the end each run's metrics.jsonl and resolved config stay, and the warm
     * starts in `warm-starts/` (the cache).
     */
    workDir: z.string().min(1),
    /** Keep every run's checkpoints and samples too (warm starts stay in `<workDir>/warm-starts`); default false. */
    keep: z.boolean().default(false),
  })
  .strict();
/** Options as passed. */
export type BenchMasOptions = z.input<typeof BenchMasSchema>;

/** Options with defaults filled in. */
export type BenchMasSettings = z.output<typeof BenchMasSchema>;

/** The agent and warm start of environment `workflow`: the bench's, with the fields `perWorkflow` names replaced. */
export function benchAgent(
  o: Pick<BenchMasSettings, 'agent' | 'warmStart' | 'perWorkflow'>,
  workflow: string,
): { agent: AgentSpec; warmStart: WarmStart } {
  const own = o.perWorkflow[workflow];
  return {
    agent: parseWith(AgentSpecSchema, { ...o.agent, ...own?.agent }, `perWorkflow.${workflow}.agent`),
    warmStart: parseWith(WarmStartSchema, { ...o.warmStart, ...own?.warmStart }, `perWorkflow.${workflow}.warmStart`),
  };
}
