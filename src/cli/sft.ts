import { join } from 'node:path';
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { savePretrained } from '../model/pretrained.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { makeTaskDataset, presetSpec, PRESETS } from '../tasks/splits.js';
import { AgentSpecSchema } from '../model/agent-spec.js';
import { taskAgent, trainSft } from '../agents/sft-trainer.js';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { ensureWritableDir } from '../util/fs-errors.js';
import { checkOutput } from '../util/output-paths.js';
import { parseWith } from '../util/json-file.js';

/** Options of `hacrl sft`, validated before anything runs. */
export const SftCliSchema = z.object({
  /** Folder to write the agent into (a Hugging Face checkpoint). */
  out: z.string().min(1),
  /** Replace an --out folder that already holds something (an agent); default false. */
  force: z.boolean().default(false),
  /** Task preset to train on: 'easy' (2-digit + and −) or 'easy-mix'. */
  task: z.enum(Object.keys(PRESETS) as [keyof typeof PRESETS, ...(keyof typeof PRESETS)[]]).default('easy'),
  /** Training problems generated; default 8000 (the easy preset has about 9,700 distinct ones). */
  trainN: z.number().int().positive().default(8000),
  /** Held-out test problems the accuracy is measured on; default 200. */
  evalN: z.number().int().positive().default(200),
  /** Seed of the data; default 0. */
  dataSeed: z.number().int().default(0),
  /** Question template ('{question}' keeps prompts short for tiny agents). */
  template: z.string().default('{question}'),
  steps: z.number().int().positive().default(3000),
  batchSize: z.number().int().positive().default(32),
  lr: z.number().positive().default(3e-3),
  warmupSteps: z.number().int().nonnegative().default(50),
  minLrRatio: z.number().min(0).max(1).default(0.1),
  weightDecay: z.number().min(0).default(0.01),
  clip: z.number().positive().default(1),
  evalEvery: z.number().int().nonnegative().default(100),
  /** Stop when greedy test accuracy reaches this; default 0.4 (RL needs room to improve). */
  stopAtAccuracy: z.number().min(0).max(1).default(0.4),
  /** Training time budget in seconds; default 540 (the final evaluation runs after it). */
  timeLimit: z.number().positive().default(540),
  maxNewTokens: z.number().int().positive().default(96),
  agent: AgentSpecSchema,
});
export type SftCliOptions = z.input<typeof SftCliSchema>;
type SftCliOptionsParsed = z.output<typeof SftCliSchema>;

/** Most parameters an agent trained from scratch here may have: each needs about 16 bytes (weights, gradients, Adam). */
export const MAX_SFT_PARAMETERS = 200_000_000;

/** Refuses an agent too big to train here, before anything is allocated; the message says what fits. */
function checkAgentSize(a: SftCliOptionsParsed['agent']): void {
  // Attention (4·h²) plus a 3·h-wide gated MLP (9·h²) per block, embeddings of a small vocabulary aside.
  const perBlock = 13 * a.hidden * a.hidden;
  const params = a.layers * perBlock;
  if (params > MAX_SFT_PARAMETERS) {
    const hidden = Math.floor(Math.sqrt(MAX_SFT_PARAMETERS / (13 * a.layers)));
    throw new Error(
      `sft: --hidden ${a.hidden} with --layers ${a.layers} is about ${(params / 1e6).toFixed(0)}M parameters; at most ` +
        `${MAX_SFT_PARAMETERS / 1e6}M fit (about 16 bytes each for weights, gradients and Adam): with ${a.layers} ` +
        `layers use --hidden ${hidden} or less`,
    );
  }
}

/** `hacrl sft`: trains a small agent from scratch on generated worked solutions and saves it with its tokenizer. */
export async function runSft(raw: SftCliOptions): Promise<void> {
  const o = parseWith(SftCliSchema, raw, 'sft options');
  checkAgentSize(o.agent);
  // The folder is checked before training, so a bad --out never costs a finished training.
  await checkOutput({ flag: '--out', path: o.out }, [], { force: o.force, folder: true });
  await ensureWritableDir(o.out, '--out');
  const train = makeTaskDataset(presetSpec(o.task, 'train', o.trainN, o.dataSeed)).problems;
  const test = makeTaskDataset(presetSpec(o.task, 'test', o.evalN, o.dataSeed)).problems;
  const prompt = { template: o.template };
  const { model, tokenizer } = taskAgent(o.agent, train, o.template);
  const k = engine();
  console.log(
    `sft: ${o.agent.arch} ${o.agent.layers}×${o.agent.hidden}, ${(model.numParameters / 1e6).toFixed(2)}M parameters, ` +
      `${o.agent.tokenizer} tokenizer (${tokenizer.vocabSize} ids), ${train.length} train / ${test.length} test ` +
      `problems (${o.task}); ${k.name} backend, ${k.blas}`,
  );
  const history: unknown[] = [];
  try {
    const options = { ...o, prompt, seed: o.dataSeed, timeLimitSec: o.timeLimit };
    const report = await trainSft(model, k, tokenizer, train, test, options, (e) => {
      history.push(e);
      if (e.step % 50 === 0 || e.accuracy !== undefined)
        console.log(
          `step ${e.step}  loss ${e.loss.toFixed(4)}  lr ${e.lr.toExponential(2)}  ${Math.round(e.tokensPerSec)} tok/s  ` +
            `${e.elapsedSec.toFixed(0)}s${e.accuracy === undefined ? '' : `  test accuracy ${(100 * e.accuracy).toFixed(1)}%`}`,
        );
    });
    await savePretrained(o.out, { model, tokenizer, generation: null });
    const g = report.greedy;
    await writeJsonAtomic(join(o.out, 'hacrl_sft.json'), {
      options: o,
      history,
      final: { greedy: g, checks: report.checks },
    });
    console.log(
      `sft: greedy accuracy ${(100 * g.value).toFixed(1)}% (95% CI ${(100 * g.low).toFixed(1)}–${(100 * g.high).toFixed(1)}%, ` +
        `n=${g.n}) on ${o.task} test; saved to ${o.out}`,
    );
  } finally {
    await closeDefaultPool();
  }
}
