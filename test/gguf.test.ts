// `hacrl export gguf` checked against llama.cpp itself (node-llama-cpp's prebuilt CPU binaries): every family's tiny
// agent loads, tokenizes as hacrl does, and decodes greedily to the same tokens with close log-probs, from f32 files
// and from f16 ones.
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { getLlama, LlamaLogLevel, type Llama, type Token } from 'node-llama-cpp';
import { engine } from '../src/backend/engine.js';
import { generate } from '../src/model/generate.js';
import { f16ToF32, f32ToF16 } from '../src/tensor/half.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { hacrl } from './cli.js';
import { saveTinyAgent } from './tiny-agents.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-gguf-'));
let llama: Llama;
before(async () => {
  // Prebuilt binaries only: never download or compile llama.cpp.
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false });
});
after(async () => {
  await llama?.dispose();
  await rm(root, { recursive: true, force: true });
});

const PROMPTS = ['the answer is', 'hello world, 12 + 30 = 42.', 'a'];
// llama.cpp keeps its KV cache in f16: on the f32 files the log-probs of the tiny agents differed by at most 2.9e-3
// nats (qwen2; llama 1.1e-3, qwen3 1.8e-3, gpt2 1.9e-3, the character agent 2.3e-3), so ~3.5× that.
const F32_TOL = 1e-2;
// On the f16 file llama.cpp also multiplies in f16: 4.0e-3 nats from hacrl on the same rounded weights (4.5e-3 from
// hacrl's unrounded f32 ones), so 3× that.
const F16_TOL = 1.2e-2;

/**
 * Greedy tokens and their log-probs (temperature 1) from hacrl and from llama.cpp on the exported file: the tokens
 * equal, the log-probs within `tol` nats. With `f16`, hacrl runs on its matrices rounded to f16 as the file stores
 * them, so that the difference left is llama.cpp's arithmetic, not the rounding.
 */
async function compare(
  dir: string,
  file: string,
  prompts: string[],
  o: { tol: number; steps?: number; f16?: boolean },
): Promise<void> {
  const steps = o.steps ?? 8;
  const agent = await loadPretrained(dir);
  if (o.f16)
    for (const t of agent.model.params.values()) if (t.shape.length > 1) t.data.set(f16ToF32(f32ToF16(t.data)));
  const model = await llama.loadModel({ modelPath: file });
  try {
    for (const text of prompts) {
      const ids = agent.tokenizer.encode(text);
      assert.deepEqual(model.tokenize(text), ids, `llama.cpp tokenizes ${JSON.stringify(text)} as hacrl does`);
      const [ours] = generate(agent.model, engine(), [ids], { temperature: 0, maxNewTokens: steps });
      const context = await model.createContext({ contextSize: 128, threads: 1 });
      const theirs: { token: number; confidence: number }[] = [];
      const it = context
        .getSequence()
        .evaluateWithMetadata(ids as Token[], { confidence: true }, { temperature: 0, yieldEogToken: true });
      for await (const t of it) if (theirs.push(t) >= steps) break;
      await context.dispose();
      assert.deepEqual(
        theirs.map((t) => t.token),
        ours!.ids,
        `greedy tokens after ${JSON.stringify(text)}`,
      );
      theirs.forEach((t, i) => {
        const diff = Math.abs(Math.log(t.confidence) - ours!.logProbs[i]!);
        assert.ok(diff < o.tol, `log-prob of token ${i} after ${JSON.stringify(text)}: ${diff} nats apart`);
      });
    }
  } finally {
    await model.dispose();
  }
}

for (const family of ['llama', 'qwen2', 'qwen3', 'gpt2'] as const)
  test(`a ${family} agent exported to GGUF decodes in llama.cpp as in hacrl`, async () => {
    const dir = join(root, family);
    const file = join(root, `${family}.gguf`);
    await saveTinyAgent(dir, family, 3);
    const r = hacrl(['export', 'gguf', '--model', dir, '--out', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`${family}, \\d+ tensors \\(f32\\), 320 tokens`));
    await compare(dir, file, PROMPTS, { tol: F32_TOL });
  });

test('f16 halves the file and decodes in llama.cpp as hacrl on the rounded weights; f32ToF16 rounds to nearest even', async () => {
  const dir = join(root, 'qwen3');
  const file = join(root, 'qwen3-f16.gguf');
  const r = hacrl(['export', 'gguf', '--model', dir, '--out', file, '--type', 'f16']);
  assert.equal(r.status, 0, r.stderr);
  const [full, half] = [await stat(join(root, 'qwen3.gguf')), await stat(file)];
  assert.ok(half.size < full.size * 0.6, `${half.size} vs ${full.size} bytes`);
  const model = await llama.loadModel({ modelPath: file });
  assert.equal(model.fileInfo.metadata.general.file_type, 1);
  await model.dispose();
  // The same greedy tokens as hacrl on the rounded weights, the log-probs as close as the f16 arithmetic allows.
  await compare(dir, file, PROMPTS, { tol: F16_TOL, f16: true });
  const xs = Float32Array.of(1, -2.5, 65504, 65520, 1e-7, 6e-8, 2.98e-8, 1 + 2 ** -11, 1 + 3 * 2 ** -11, NaN);
  const back = f16ToF32(f32ToF16(xs));
  assert.deepEqual(
    [...back.slice(0, 9)],
    [1, -2.5, 65504, Infinity, 1.1920928955078125e-7, 5.960464477539063e-8, 0, 1, 1 + 2 ** -9],
  );
  assert.ok(Number.isNaN(back[9]));
});

test("a character tokenizer's agent exports as a merge-free byte-level vocabulary", async () => {
  const dir = join(root, 'char');
  const file = join(root, 'char.gguf');
  // The 95 printable ASCII characters and two special tokens: the tiny models' 97 ids.
  const alphabet = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
  const tokenizer = new CharTokenizer({
    alphabet,
    specialTokens: ['<eos>', '<pad>'],
    names: { eos: '<eos>', pad: '<pad>' },
  });
  await savePretrained(dir, { model: testModel(CONFIGS.llama!, 4), tokenizer, generation: null });
  assert.equal(hacrl(['export', 'gguf', '--model', dir, '--out', file]).status, 0);
  await compare(dir, file, ['12+30=', 'What is 7 * 6? Answer: '], { tol: F32_TOL, steps: 6 });
  const wide = join(root, 'char-wide');
  const accented = new CharTokenizer({
    alphabet: `${alphabet.slice(0, 94)}é`,
    specialTokens: ['<eos>', '<pad>'],
    names: { eos: '<eos>' },
  });
  await savePretrained(wide, { model: testModel(CONFIGS.llama!, 4), tokenizer: accented, generation: null });
  const r = hacrl(['export', 'gguf', '--model', wide, '--out', join(root, 'wide.gguf')]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /token "é" is not one byte/);
});
