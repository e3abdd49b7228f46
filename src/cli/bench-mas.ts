/**
 * `hacrl bench mas`: on each environment, one warm-started agent (SFT on solver rows) is the common start of every
 * seed of four arms — the single agent (planner alone) trained with GRPO, the multi-agent workflow untrained, and the workflow
 * trained with AT-GRPO with a shared policy and with per-role policies (both roles starting from the same weights).
 * Every arm is measured by greedy success on the same held-out instances; the trained arms generate the same number of
 * responses per step (the single agent plays twice the instances, as it has one role where the workflow has two).
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { parseRunConfig } from '../config/load-config.js';
import { wilson, type Estimate } from '../eval/evaluate.js';
import { savePretrained } from '../model/pretrained.js';
import { AgentSpecSchema } from '../zoo/agent-spec.js';
import { trainRl } from '../train/rl-trainer.js';
import { WarmStartSchema, workflowAgent } from '../train/workflow-agent.js';
import { playHeldOut, successRate } from '../train/workflow-source.js';
import { parseWith } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { buildWorkflow } from '../workflows/registry.js';

/** Options of `hacrl bench mas`. */
export const BenchMasSchema = z
  .object({
    /** Workflow sections, one per environment; default Plan-Path 5×5 and Sudoku 4×4 with few blanks. */
    workflows: z.array(z.record(z.string(), z.unknown())).min(1),
    /** Seeds (each: its own training instances, sampling and mini-batch order); default 3. */
    seeds: z.number().int().positive().default(3),
    /** RL steps of every trained arm; default 10. */
    steps: z.number().int().positive(),
    /** Instances per step of the workflow arms (the single agent plays twice as many); default 4. */
    instancesPerStep: z.number().int().positive().default(4),
    /** Held-out instances per seed (greedy, one episode each); default 50. */
    heldOut: z.number().int().positive().default(50),
    /** Learning rate of the RL arms; default 1e-3. */
    lr: z.number().positive().default(1e-3),
    agent: AgentSpecSchema.prefault({}),
    warmStart: WarmStartSchema.prefault({}),
    /** Working folder (agents and runs); removed at the end unless keep. */
    workDir: z.string().min(1),
    keep: z.boolean().default(false),
  })
  .strict();
/** Options as passed. */
export type BenchMasOptions = z.input<typeof BenchMasSchema>;

/** The arms, in the order the table lists them. */
export const ARMS = ['single-grpo', 'workflow-untrained', 'at-grpo-shared', 'at-grpo-per-role'] as const;
/** An arm's name. */
export type Arm = (typeof ARMS)[number];

/** One environment's result: per arm, successes pooled over seeds with the 95% Wilson interval, and per seed. */
export interface BenchMasResult {
  workflow: string;
  /** Responses generated per training step by each trained arm (the equal rollout budget). */
  responsesPerStep: Record<string, number>;
  arms: Record<Arm, { pooled: Estimate; perSeed: number[] }>;
}

/** Runs the benchmark; `log` receives progress lines. */
export async function runBenchMas(raw: BenchMasOptions, log: (line: string) => void): Promise<BenchMasResult[]> {
  const o = parseWith(BenchMasSchema, raw, 'bench mas options');
  const k = engine();
  const out: BenchMasResult[] = [];
  for (const section of o.workflows) {
    const wf = buildWorkflow(section);
    const successes = Object.fromEntries(ARMS.map((a) => [a, [] as number[]])) as Record<Arm, number[]>;
    const budget: Record<string, number> = {};
    // One warm start per environment is the common start of every seed and arm; seeds vary RL (instances, sampling).
    const start = join(o.workDir, wf.name, 'warm');
    await rm(join(o.workDir, wf.name), { recursive: true, force: true });
    const agent = await workflowAgent(wf, o.agent, o.warmStart, 0, k, log);
    await savePretrained(start, { ...agent, generation: null });
    // Greedy on the same held-out instances: the untrained workflow's result is the same for every seed.
    const untrained = await playHeldOut(
      wf,
      Object.fromEntries(wf.roles.map((r) => [r.policy, modelPolicy(agent.model, agent.tokenizer, k, new Rng(1))])),
      o.heldOut,
    );
    log(`${wf.name} workflow-untrained: held-out success ${successRate(untrained).toFixed(3)}`);
    for (let seed = 0; seed < o.seeds; seed++) {
      const dir = join(o.workDir, wf.name, `seed-${seed}`);
      await mkdir(dir, { recursive: true });
      successes['workflow-untrained'].push(untrained.episodes.filter((e) => e.success).length);
      const roles = wf.roles.map((r) => r.name);
      const arms: [Arm, Record<string, unknown>, string[], number][] = [
        ['single-grpo', { ...section, sampling: 'single', roles: {} }, ['shared'], 2 * o.instancesPerStep],
        ['at-grpo-shared', { ...section, roles: {} }, ['shared'], o.instancesPerStep],
        [
          'at-grpo-per-role',
          { ...section, roles: Object.fromEntries(roles.map((r) => [r, { policy: r }])) },
          roles,
          o.instancesPerStep,
        ],
      ];
      for (const [arm, workflow, agents, instances] of arms) {
        const runDir = join(dir, arm);
        const cfg = parseRunConfig({
          algorithm: 'at-grpo',
          agents: agents.map((name) => ({ name, checkpoint: start })),
          workflow,
          rollout: { promptsPerStep: instances },
          optim: { lr: o.lr },
          steps: o.steps,
          seed,
          eval: { every: 0, problems: o.heldOut },
          checkpoint: { every: 0, keepLast: 1 },
          samplesPerStep: 2,
          runDir,
        });
        await trainRl(cfg, { resume: false, progress: () => {} });
        const rows = (await readFile(join(runDir, 'metrics.jsonl'), 'utf8'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        const final = rows.at(-1)!;
        const last = final[`agent/${agents[0]!}/val/${wf.name}/greedy`] as number;
        successes[arm].push(Math.round(last * o.heldOut));
        // Responses generated per step, summed over the arm's policies (the same in every step's first row; row 0
        // is the base models' validation).
        const first = rows.find((r) => r['step'] === 1)!;
        budget[arm] = agents.reduce((n, a) => n + (first[`agent/${a}/samples`] as number), 0);
        log(`${wf.name} seed ${seed} ${arm}: held-out success ${last.toFixed(3)}`);
      }
      if (!o.keep) await rm(dir, { recursive: true, force: true });
    }
    if (!o.keep) await rm(join(o.workDir, wf.name), { recursive: true, force: true });
    const n = o.seeds * o.heldOut;
    const arms = Object.fromEntries(
      ARMS.map((a) => [
        a,
        {
          pooled: wilson(
            successes[a].reduce((x, y) => x + y, 0),
            n,
          ),
          perSeed: successes[a].map((s) => s / o.heldOut),
        },
      ]),
    ) as BenchMasResult['arms'];
    out.push({ workflow: wf.name, responsesPerStep: budget, arms });
  }
  return out;
}

/** The results as a Markdown table: success (pooled over seeds) with its 95% interval, per arm and environment. */
export function benchMasTable(results: readonly BenchMasResult[]): string {
  const pct = (x: number): string => (100 * x).toFixed(1);
  const lines = [
    '| env | arm | success % | 95% interval | per seed | responses/step |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results)
    for (const a of ARMS) {
      const { pooled, perSeed } = r.arms[a];
      lines.push(
        `| ${r.workflow} | ${a} | ${pct(pooled.value)} | ${pct(pooled.low)}–${pct(pooled.high)} | ` +
          `${perSeed.map(pct).join(' / ')} | ${r.responsesPerStep[a] ?? '—'} |`,
      );
    }
  return lines.join('\n');
}
