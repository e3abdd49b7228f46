// An agent folder is saved whole or not at all: a save that fails part-way (here the file size limit) leaves the old
// agent loadable and unchanged, names the file it could not write, and leaves nothing behind; a save that succeeds
// keeps the folder's other files and drops the weight files of the earlier save.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-save-'));
after(() => rm(root, { recursive: true, force: true }));

const TOKENIZER = {
  alphabet: ' 0123456789+-*/=()abcdefghijklmnopqrstuvwxyz.?',
  specialTokens: ['<eos>', '<pad>'],
  names: { eos: '<eos>', pad: '<pad>' },
};
const tokenizer = new CharTokenizer(TOKENIZER);
const dist = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

describe('saving an agent folder', () => {
  test('a save that fails part-way leaves the old agent whole, names the file, and leaves nothing behind', async () => {
    const dir = join(root, 'agent');
    await savePretrained(dir, { model: testModel(CONFIGS.qwen3!, 1), tokenizer, generation: null });
    const before = await Promise.all(['config.json', 'model.safetensors'].map((f) => readFile(join(dir, f))));
    // Another family (a different config.json) under a file size limit its weights exceed.
    const child = spawnSync(
      'prlimit',
      [
        '--fsize=65536',
        '--',
        process.execPath,
        '--input-type=module',
        '-e',
        `const { savePretrained } = await import(${JSON.stringify(dist('../src/model/pretrained.js'))});
         const { CharTokenizer } = await import(${JSON.stringify(dist('../src/tokenizer/char-tokenizer.js'))});
         const { CONFIGS, testModel } = await import(${JSON.stringify(dist('./tiny-models.js'))});
         const tokenizer = new CharTokenizer(${JSON.stringify(TOKENIZER)});
         await savePretrained(${JSON.stringify(dir)}, { model: testModel(CONFIGS.llama, 2), tokenizer, generation: null });`,
      ],
      { encoding: 'utf8' },
    );
    assert.notEqual(child.status, 0);
    assert.match(child.stderr, new RegExp(`saving ${dir}: writing .*model\\.safetensors: EFBIG`));
    const after = await Promise.all(['config.json', 'model.safetensors'].map((f) => readFile(join(dir, f))));
    assert.ok(
      after.every((b, i) => b.equals(before[i]!)),
      'config and weights unchanged',
    );
    assert.equal((await loadPretrained(dir)).model.cfg.hidden, testModel(CONFIGS.qwen3!, 1).cfg.hidden);
    assert.deepEqual(
      (await readdir(root)).filter((f) => f.startsWith('.')),
      [],
      'no half-written folder left',
    );
  });

  test("a save keeps the folder's other files and drops the earlier save's weight files", async () => {
    const dir = join(root, 'resaved');
    await savePretrained(
      dir,
      { model: testModel(CONFIGS.qwen3!, 3), tokenizer, generation: null },
      { maxShardBytes: 64 << 10 },
    );
    assert.ok(existsSync(join(dir, 'model.safetensors.index.json')), 'sharded first');
    await writeFile(join(dir, 'notes.txt'), 'kept');
    await savePretrained(dir, { model: testModel(CONFIGS.qwen3!, 4), tokenizer, generation: null });
    const files = (await readdir(dir)).sort();
    assert.ok(files.includes('notes.txt') && files.includes('model.safetensors'));
    assert.ok(!files.some((f) => /^model-\d+-of-\d+\.safetensors$|index\.json$/.test(f)), files.join(' '));
    assert.equal(await readFile(join(dir, 'notes.txt'), 'utf8'), 'kept');
    const loaded = (await loadPretrained(dir)).model.p('model.norm.weight').data;
    assert.deepEqual(loaded, testModel(CONFIGS.qwen3!, 4).p('model.norm.weight').data);
  });
});
