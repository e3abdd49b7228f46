// Sizes and paths from the command line and config files: absurd sizes are refused with what fits, paths are checked
// before any work (naming the flag or field), and bad rows name their field.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { generate } from '../src/model/generate.js';
import { RunFolder } from '../src/run/run-folder.js';
import { hacrl } from './cli.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-cli-limits-'));
after(() => rm(root, { recursive: true, force: true }));
const aFile = join(root, 'a-file');
await writeFile(aFile, 'not a folder\n');

describe('sizes', () => {
  test('sft refuses an agent too big to train, before building it, and says what fits', () => {
    const start = performance.now();
    const r = hacrl(['sft', '--out', join(root, 'big'), '--hidden', '96000']);
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      /--hidden 96000 with --layers 4 is about \d+M parameters; at most 200M fit .* use --hidden 1961/,
    );
    assert.ok(performance.now() - start < 10_000);
  });

  test('config sizes have upper bounds that say why; the divisor hint stays cheap', () => {
    const cfg = 'examples/grpo-easy.yaml';
    const big = hacrl([
      'config',
      'resolve',
      cfg,
      'rollout.promptsPerStep=1000000000',
      'rollout.maxNewTokens=100000000',
    ]);
    assert.equal(big.status, 1);
    assert.match(big.stderr, /must be at most 4096 \(a step holds promptsPerStep × groupSize sequences in memory\)/);
    assert.match(big.stderr, /rollout\.promptsPerStep/);
    assert.match(big.stderr, /must be at most 32768/);
    const start = performance.now();
    const hint = hacrl([
      'config',
      'resolve',
      cfg,
      'rollout.promptsPerStep=4096',
      'rollout.groupSize=1024',
      'optim.miniBatches=7',
    ]);
    assert.equal(hint.status, 1);
    assert.match(hint.stderr, /set optim\.miniBatches to a divisor of 4194304 \(1, 2, 4, 8, .* 4194304\)/);
    assert.ok(performance.now() - start < 10_000);
  });

  test('a prompt longer than the model positions is a clear error (rotary and learned positions)', () => {
    for (const family of ['llama', 'gpt2']) {
      const model = testModel(CONFIGS[family]!, 1);
      const n = model.cfg.maxPositions;
      assert.throws(
        () => generate(model, engine(), [Array.from({ length: n + 1 }, () => 5)], { maxNewTokens: 1, temperature: 0 }),
        new RegExp(`prompt ${n + 1} \\+ 1 new tokens exceed the model's ${n} positions`),
      );
    }
  });
});

describe('paths are checked before work and errors name the flag or field', () => {
  test('sft --out that is a file fails at once, not after training', () => {
    const r = hacrl(['sft', '--out', aFile, '--hidden', '32', '--layers', '1', '--heads', '2']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /--out .*a-file: a file with that name is in the way/);
    assert.doesNotMatch(r.stdout, /step/);
    const under = hacrl(['sft', '--out', join(aFile, 'agent'), '--hidden', '32', '--layers', '1', '--heads', '2']);
    assert.match(under.stderr, /--out .*: part of the path is a file, not a folder \(ENOTDIR\)/);
  });

  test('runDir that is a file names runDir', async () => {
    await assert.rejects(new RunFolder(aFile).init({}), /runDir .*a-file: a file with that name is in the way/);
    await assert.rejects(new RunFolder(join(aFile, 'run')).init({}), /runDir .*: part of the path is a file/);
  });

  test('--output that is a folder, or in a missing folder, is refused before checking', async () => {
    const input = join(root, 'rows.jsonl');
    await writeFile(input, '{"gold": "1", "answer": "1"}\n');
    const folder = join(root, 'out-folder');
    await mkdir(folder);
    const r = hacrl(['verify', '--input', input, '--output', folder]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /--output .*out-folder: it is a folder, not a file/);
    const missing = hacrl(['verify', '--input', input, '--output', join(root, 'nope', 'out.jsonl')]);
    assert.match(missing.stderr, /--output .*: a folder on the path does not exist/);
  });
});

describe('rows with wrong types name the field', () => {
  test('score and verify rows', async () => {
    const rows = join(root, 'score.jsonl');
    await writeFile(rows, '{"prompt": "a", "response": "b"}\n{"prompt": 5, "response": "x"}\n');
    const r = hacrl(['score', '--model', root, '--input', rows]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /score\.jsonl:2: .*expected string, received number.*at prompt/);
    await writeFile(rows, '{"prompt_ids": [1, "a"], "response_ids": [2]}\n');
    assert.match(hacrl(['score', '--model', root, '--input', rows]).stderr, /at prompt_ids\[1\]/);
    await writeFile(rows, '{"gold": [1], "answer": "1"}\n');
    assert.match(hacrl(['verify', '--input', rows]).stderr, /expected string, received array.*at gold/);
  });
});
