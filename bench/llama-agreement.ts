/**
 * `npm run bench:llama-agreement -- --model DIR|--shape NAME [--type=f32|bf16] [--steps=N] [--threads=N]`: whether
 * llama.cpp (node-llama-cpp's prebuilt CPU build) decodes an agent folder exported to GGUF greedily as hacrl does, at
 * 1, 8 and 32 sequences, and where not, why. The prompts are held-out 'easy' problems rendered as the zoo trains on
 * them (the bare question), in the agent's own tokenizer; with --shape (src/model/shapes.ts), random weights of that
 * shape and 32 prompts of 32 random ids, exported as bench:model --shape exports them. Each side decodes the 32 prompts twice: each alone, and 1, 8 or 32 of them as one batch
 * (hacrl: one left-padded generate call; llama.cpp: that many sequences of one context, decoded together). Printed per
 * batch: the sequences whose first N greedy tokens agree between the two sides batched, between each side's batched
 * and lone runs, and between the two sides alone; and, for every disagreement between the two sides, hacrl's margin
 * between its two most likely tokens at the first step that differs (a near-tie flips under any other summation
 * order). bf16 runs hacrl on the model at bf16 and exports bf16 matrices, so both sides hold the same weights.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine } from '../src/backend/engine.js';
import { writeAgentGguf } from '../src/export/gguf.js';
import { generate } from '../src/model/generate.js';
import { loadPretrained } from '../src/model/pretrained.js';
import { Transformer } from '../src/model/transformer.js';
import { makeTaskDataset, presetSpec } from '../src/tasks/splits.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { shapeConfig } from '../src/model/shapes.js';
import { initModel } from '../src/model/weights.js';
import { Rng } from '../src/util/rng.js';
import { closeLlamaCpp, llamaCppDecode, llamaCppInfo, loadLlamaModel, writeBenchGguf } from './llama-cpp.js';

const argv = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
};
const dir = option('model');
const shape = option('shape');
if (!dir === !shape)
  throw new Error(
    'give --model DIR (an agent folder, e.g. a zoo agent under runs/zoo) or --shape NAME (random weights)',
  );
const type = option('type') ?? 'f32';
if (type !== 'f32' && type !== 'bf16') throw new Error(`--type=${type}: use f32 or bf16`);
/** New tokens compared per sequence; default 8. */
const steps = Number(option('steps') ?? 8);
const threads = Number(option('threads') ?? 2);
if (!Number.isInteger(steps) || steps < 1) throw new Error(`--steps=${option('steps')}: a whole number ≥ 1`);
if (!Number.isInteger(threads) || threads < 1) throw new Error(`--threads=${option('threads')}: a whole number ≥ 1`);
const BATCHES = [1, 8, 32];

const agent = dir ? await loadPretrained(dir) : null;
const loaded = agent?.model ?? initModel(shapeConfig(shape!), 1234);
const model = type === 'bf16' ? new Transformer(loaded.cfg, loaded.params, loaded.adapters, 'bf16') : loaded;
const k = engine();
const count = Math.max(...BATCHES);
const rng = new Rng(1235);
const prompts = agent
  ? makeTaskDataset(presetSpec('easy', 'test', count, 1)).problems.map((p) =>
      // The bare question, as the zoo's agents are trained on it.
      agent.tokenizer.encode(renderPrompt(agent.tokenizer, p.prompt, { template: '{question}' })),
    )
  : Array.from({ length: count }, () => Array.from({ length: 32 }, () => 1 + rng.int(model.cfg.vocabSize - 1)));

const work = await mkdtemp(join(tmpdir(), 'hacrl-agreement-'));
try {
  const file = join(work, 'agent.gguf');
  if (agent) await writeAgentGguf({ ...agent, model }, file, type, 'agreement');
  else await writeBenchGguf(model, file, type);
  console.log(
    `${dir ?? `${shape}, random weights,`} as GGUF ${type}; ${await llamaCppInfo()}; ${threads} threads, greedy, first ${steps} tokens`,
  );
  console.log(
    `prompts: ${prompts.length} held-out 'easy' problems, ${Math.min(...prompts.map((p) => p.length))}–` +
      `${Math.max(...prompts.map((p) => p.length))} tokens`,
  );
  const llamaModel = await loadLlamaModel(file);
  process.env.HACRL_THREADS = String(threads);
  const ours = (ps: number[][]): number[][] =>
    generate(model, k, ps, { temperature: 0, maxNewTokens: steps }).map((g) => g.ids);
  const theirs = async (ps: number[][]): Promise<number[][]> =>
    (await llamaCppDecode(llamaModel, ps, steps, threads)).tokens;
  const oursAlone = prompts.map((p) => ours([p])[0]!);
  const theirsAlone: number[][] = [];
  for (const p of prompts) theirsAlone.push((await theirs([p]))[0]!);
  const same = (a: number[][], b: number[][]): number => a.filter((x, i) => x.join() === b[i]!.join()).length;
  console.log(`alone: hacrl = llama.cpp in ${same(oursAlone, theirsAlone)}/${prompts.length}`);
  for (const batch of BATCHES) {
    const ps = prompts.slice(0, batch);
    const [o, t] = [ours(ps), await theirs(ps)];
    const margins = o.flatMap((seq, b) => {
      const at = seq.findIndex((tok, j) => tok !== t[b]![j]);
      return at < 0 ? [] : [`${round(topMargin(ps[b]!, seq.slice(0, at)), 3)} at token ${at + 1}`];
    });
    console.log(
      `${batch} sequences: hacrl = llama.cpp in ${same(o, t)}/${batch}; hacrl batched = alone ` +
        `${same(o, oursAlone)}/${batch}; llama.cpp batched = alone ${same(t, theirsAlone)}/${batch}` +
        (margins.length ? `; hacrl's top-2 logit margins where they part: ${margins.join(', ')}` : ''),
    );
  }
  await llamaModel.dispose();
} finally {
  await closeLlamaCpp();
  await rm(work, { recursive: true, force: true });
}

/** hacrl's logit gap between its two most likely next tokens after `prompt` + `continuation`, alone. */
function topMargin(prompt: number[], continuation: number[]): number {
  const seq = [...prompt, ...continuation];
  const logits = model.withInferenceWeights(() => {
    const hidden = model.forward({ k, tape: null }, { ids: Int32Array.from(seq), batch: 1, seqLen: seq.length });
    return model.logits(k, hidden.data.subarray((seq.length - 1) * model.cfg.hidden), 1);
  });
  let [a, b] = [-Infinity, -Infinity];
  for (const x of logits)
    if (x > a) [a, b] = [x, a];
    else if (x > b) b = x;
  return a - b;
}

function round(x: number, d: number): number {
  return Number(x.toFixed(d));
}
