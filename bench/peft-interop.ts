// Checks hacrl's LoRA adapter folders against the PEFT library itself, both ways, on the tiny model of each family
// (test/tiny-models.ts): PEFT loads an adapter hacrl saved (`PeftModel.from_pretrained`) and gives hacrl's logits,
// PEFT's `merge_and_unload` and hacrl's merged folder (read by transformers) give them too, and hacrl loads an adapter
// PEFT saved (`get_peft_model` with random A and B, `save_pretrained`) and gives PEFT's logits. A check for machines
// that have PEFT, not a test: Debian packages neither transformers nor peft, and nothing is downloaded by the suite.
//
//   HACRL_PEFT_PYTHON=/path/to/venv/bin/python3 npm run check:peft     # a Python with torch, transformers and peft
//
// Exits 1 when any relative error is above TOLERANCE.
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine } from '../src/backend/engine.js';
import { LoraAdapters } from '../src/model/lora.js';
import { adapt, mergeAdapters, readAdapterFiles, writeAdapterFiles } from '../src/model/peft.js';
import type { Transformer } from '../src/model/transformer.js';
import { saveModel } from '../src/model/weights.js';
import { mulberry32, randInt, relError, uniform } from '../test/helpers.js';
import { CONFIGS, testModel, VOCAB } from '../test/tiny-models.js';

/** Largest relative error (max |Δ| / max |logit|) accepted between hacrl's and PEFT's logits, in float32. */
const TOLERANCE = 1e-4;
const BATCH = 2;
const SEQ = 6;
const FAMILIES = ['llama', 'qwen2', 'qwen3', 'gpt2'];
const python = process.env.HACRL_PEFT_PYTHON;
if (!python) {
  console.error('set HACRL_PEFT_PYTHON to a Python with torch, transformers and peft (e.g. a virtual environment)');
  process.exit(2);
}
const k = engine();
const root = await mkdtemp(join(tmpdir(), 'hacrl-peft-'));
const ids = randInt(BATCH * SEQ, mulberry32(3), 0, VOCAB);

/** Logits [B·T·V] of `model` on `ids`. */
const logits = (model: Transformer) =>
  model.logits(k, model.forward({ k, tape: null }, { ids, batch: BATCH, seqLen: SEQ }).data, BATCH * SEQ);

// Per family: base/ (a plain checkpoint), adapter/ (ours, random A and B on every linear projection), merged/ (ours),
// and the logits of both models for the Python side.
const models = new Map<string, Transformer>();
for (const [i, family] of FAMILIES.entries()) {
  const dir = join(root, family);
  const base = testModel(CONFIGS[family]!, 10 + i);
  await saveModel(join(dir, 'base'), base);
  const adapters = LoraAdapters.init(
    base.cfg,
    { rank: 4, alpha: 8, dropout: 0, targets: 'all-linear' },
    join(dir, 'base'),
    i,
  );
  for (const t of adapters.params.values()) t.data.set(uniform(t.size, mulberry32(t.size + i), -0.2, 0.2));
  const model = adapt(base, adapters);
  await writeAdapterFiles(join(dir, 'adapter'), adapters);
  await saveModel(join(dir, 'merged'), mergeAdapters(model));
  models.set(family, base);
  const json = { ids: [...ids], batch: BATCH, seq: SEQ, base: [...logits(base)], adapted: [...logits(model)] };
  await writeFile(join(dir, 'hacrl.json'), JSON.stringify(json));
}

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'peft_interop.py');
const run = spawnSync(python, [script, root, FAMILIES.join(',')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
});
if (run.status !== 0) {
  console.error(`${python} ${script} exited with ${run.status}`);
  process.exit(1);
}
const fromPeft = JSON.parse(run.stdout) as Record<string, Record<string, number>>;

let failed = false;
console.log(`relative error of the logits against hacrl's (tolerance ${TOLERANCE}); ${fromPeft['versions']!['text']}`);
console.log(
  '| family | base in transformers | our adapter in PEFT | PEFT merge_and_unload | our merged folder | PEFT adapter in hacrl |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const family of FAMILIES) {
  const dir = join(root, family);
  const base = models.get(family)!;
  // The adapter PEFT saved, loaded as `hacrl` loads any adapter folder, against the logits PEFT computed with it.
  const peft = JSON.parse(await readFile(join(dir, 'peft.json'), 'utf8')) as { logits: number[] };
  const theirs = adapt(base, await readAdapterFiles(join(dir, 'peft-adapter'), base.cfg, join(dir, 'base')));
  const row = { ...fromPeft[family]!, 'PEFT adapter in hacrl': relError(logits(theirs), peft.logits) };
  failed ||= Object.values(row).some((e) => !(e <= TOLERANCE));
  console.log(
    `| ${family} | ${Object.values(row)
      .map((e) => e.toExponential(1))
      .join(' | ')} |`,
  );
}
await rm(root, { recursive: true, force: true });
console.log(failed ? 'FAILED' : 'all within tolerance');
process.exit(failed ? 1 : 0);
