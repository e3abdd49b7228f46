/**
 * `hacrl mas warmstart`: a small agent for a workflow, saved as a checkpoint folder that `hacrl train` (algorithm
 * at-grpo) starts from — a tokenizer fitted to the workflow's text, a fresh model, and SFT on solver rows bounded by
 * `--steps` (0: untrained). `--role` restricts the rows to one role's, for per-role policies.
 */
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { savePretrained } from '../model/pretrained.js';
import { AgentSpecSchema } from '../model/agent-spec.js';
import { WarmStartSchema, workflowAgent } from '../agents/workflow-agent.js';
import { ensureWritableDir } from '../util/fs-errors.js';
import { checkOutput } from '../util/output-paths.js';
import { parseWith } from '../util/json-file.js';
import { buildWorkflow } from '../workflows/registry.js';

/** Options of `hacrl mas warmstart`. */
export const MasWarmstartSchema = z
  .object({
    /** Folder to write the agent into; required. */
    out: z.string().min(1),
    /** The `workflow` config section (docs/at-grpo.md); default plan-path with its defaults. */
    workflow: z.record(z.string(), z.unknown()).default({}),
    /** The agent's architecture, size and tokenizer. */
    agent: AgentSpecSchema.prefault({}),
    /** SFT on solver rows. */
    warmStart: WarmStartSchema.prefault({}),
    /** Seed of the SFT batch order; default 0. */
    seed: z.number().int().default(0),
    /** Replace an `out` folder that already holds something; default false. */
    force: z.boolean().default(false),
  })
  .strict();
/** Options as passed. */
export type MasWarmstartOptions = z.input<typeof MasWarmstartSchema>;

/** Builds, warm-starts and saves the agent; returns its folder. */
export async function runMasWarmstart(raw: MasWarmstartOptions, log: (line: string) => void): Promise<string> {
  const o = parseWith(MasWarmstartSchema, raw, 'mas warmstart options');
  // Checked before training, so a bad --out never costs a finished warm start, and never replaces one unasked.
  await checkOutput({ flag: '--out', path: o.out }, [], { force: o.force, folder: true });
  await ensureWritableDir(o.out, '--out');
  const wf = buildWorkflow(o.workflow);
  const { model, tokenizer, band } = await workflowAgent(wf, o.agent, o.warmStart, o.seed, engine(), log);
  await savePretrained(o.out, { model, tokenizer, generation: null });
  const stop =
    band === undefined
      ? `${o.warmStart.steps} warm-start steps`
      : `${band.steps} warm-start steps, ${(100 * band.calibration).toFixed(1)}% on calibration: ${band.outcome}` +
        (band.attempts.length > 1 ? ` (attempt ${band.attempt} of ${band.attempts.length} tried)` : '');
  log(`saved ${o.out} (${wf.name}, vocabulary ${tokenizer.vocabSize}, ${stop})`);
  return o.out;
}
