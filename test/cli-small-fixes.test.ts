// The smaller items of a trial run: a stack on request, GGUF exports in the checkpoint's own dtype, and an example
// whose prompt asks for \boxed{} once. (A resume of a finished run saying so: test/rl-train.test.ts.)
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadRunConfig } from '../src/config/load-config.js';
import { checkpointTensorType } from '../src/export/gguf.js';
import { readCheckpoint, writeCheckpoint } from '../src/model/checkpoint.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { hacrl } from './cli.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';
import { loadPretrained } from '../src/model/pretrained.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-small-'));
after(() => rm(root, { recursive: true, force: true }));

test('--debug and HACRL_DEBUG=1 print the stack of an error; without them, the message alone', () => {
  const args = ['export', 'gguf', '--model', join(root, 'missing'), '--out', join(root, 'x.gguf')];
  const plain = hacrl(args);
  assert.equal(plain.status, 1);
  assert.match(plain.stderr, /^hacrl: /);
  assert.doesNotMatch(plain.stderr, /\n\s+at /);
  for (const r of [hacrl([...args, '--debug']), hacrl(['--debug', ...args]), hacrl(args, { HACRL_DEBUG: '1' })]) {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^hacrl: Error: .*\n\s+at /);
  }
});

test("export gguf stores the matrices in the checkpoint's own dtype unless --type says otherwise", async () => {
  const f32 = join(root, 'f32');
  await saveTinyAgent(f32, 'qwen2', 2);
  assert.equal(await checkpointTensorType(f32), 'f32');
  const bf16 = join(root, 'bf16');
  await saveTinyAgent(bf16, 'qwen2', 2);
  const weights = await readCheckpoint(bf16);
  await writeCheckpoint(bf16, weights, { floatDtype: 'BF16' });
  assert.equal(await checkpointTensorType(bf16), 'bf16');
  // An adapter folder exports as its merge, in its base's dtype (as PEFT's merge keeps it).
  const adapter = join(root, 'adapter');
  await saveTinyAdapter(adapter, bf16, 4);
  assert.equal(await checkpointTensorType(adapter), 'bf16');
  const out = (name: string, extra: string[] = []) =>
    hacrl([
      'export',
      'gguf',
      '--model',
      join(root, name),
      '--out',
      join(root, `${name}-${extra.length}.gguf`),
      ...extra,
    ]);
  assert.match(out('f32').stdout, /tensors \(f32\)/);
  assert.match(out('bf16').stdout, /tensors \(bf16\)/);
  assert.match(out('bf16', ['--type', 'f32']).stdout, /tensors \(f32\)/);
});

test('the GSM8K example asks for the answer in \\boxed{} once', async () => {
  const cfg = await loadRunConfig('examples/hacpo-gsm8k-lora.yaml');
  const tokenizer = (await loadPretrained(join(root, 'f32'))).tokenizer;
  const prompt = renderPrompt(tokenizer, 'Natalia sold 48 clips. How many?', {
    template: cfg.data.template,
    ...(cfg.data.system === undefined ? {} : { system: cfg.data.system }),
  });
  assert.equal(prompt.split('\\boxed{}').length - 1, 1, prompt);
});
