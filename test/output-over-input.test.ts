// Outputs never over inputs (issue 55): `export gguf`, `lora merge`, `sft`, `demo` and `bench paper` refuse an output
// that is or lies inside what they read (through symlinks, relative paths, trailing slashes), and an input inside an
// output folder they replace, before any work and with the input files byte for byte unchanged; an existing output
// needs --force; a SIGKILLed export leaves no file under the final name; non-finite weights are never exported or
// loaded for serving and merging.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readGgufFileInfo } from 'node-llama-cpp';
import { LoraAdapters } from '../src/model/lora.js';
import { adapt, ADAPTER_WEIGHTS } from '../src/model/peft.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { STALL_ENV } from '../src/util/atomic-write.js';
import { hacrl, hacrlKilledAt } from './cli.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-out-in-'));
const base = join(root, 'base');
const adapter = join(root, 'adapter');
after(() => rm(root, { recursive: true, force: true }));
before(async () => {
  await saveTinyAgent(base, 'qwen3', 3);
  await saveTinyAdapter(adapter, base, 5);
});

/** sha256 of every file under `dir` (or of the file `dir`), by path. */
async function hashes(dir: string): Promise<Record<string, string>> {
  if (!(await stat(dir)).isDirectory())
    return {
      [dir]: createHash('sha256')
        .update(await readFile(dir))
        .digest('hex'),
    };
  const out: Record<string, string> = {};
  for (const name of await readdir(dir)) Object.assign(out, await hashes(join(dir, name)));
  return out;
}

/** Runs `hacrl ARGS`, requires a refusal matching `message`, and that no file under `inputs` changed. */
async function refused(args: string[], message: RegExp, inputs: string[] = [base, adapter]): Promise<void> {
  const before = await Promise.all(inputs.map(hashes));
  const r = hacrl(args);
  assert.equal(r.status, 1, `${args.join(' ')}: ${r.stdout}`);
  assert.match(r.stderr, message);
  assert.deepEqual(await Promise.all(inputs.map(hashes)), before, `${args.join(' ')} changed an input`);
}

describe('an output over an input is refused with the inputs unchanged', () => {
  test('export gguf: --out the checkpoint file, inside the folder, through a symlink, inside an adapter base', async () => {
    const same = /--out .* and --model .* are the same path .*choose another --out/;
    await refused(['export', 'gguf', '--model', base, '--out', join(base, 'model.safetensors')], /lies inside --model/);
    await refused(['export', 'gguf', '--model', base, '--out', base], same);
    // A relative path with a trailing slash and a symlinked folder name the same real place.
    await symlink(base, join(root, 'link'));
    await refused(['export', 'gguf', '--model', `${relative('.', base)}/`, '--out', join(root, 'link')], same);
    await refused(
      ['export', 'gguf', '--model', adapter, '--out', join(root, 'link', 'model.safetensors')],
      /--out .*link\/model\.safetensors lies inside its base .*base, which this command reads/,
    );
  });

  test('lora merge: --out the base, the adapter, or a folder holding the adapter', async () => {
    const merge = (out: string, ...more: string[]) => ['lora', 'merge', '--adapter', adapter, '--out', out, ...more];
    await refused(merge(base), /--out .*base and its base .*base are the same path/);
    await refused(merge(join(root, 'link'), '--base', base), /--out .*link and --base .*base are the same path/);
    await refused(merge(adapter), /--out .*adapter and --adapter .*adapter are the same path/);
    await refused(merge(`${root}/`), /--adapter .*adapter lies inside --out .*, which this command replaces/);
  });

  test('demo and bench paper: a run or output folder overlapping the zoo they read', async () => {
    const zoo = join(root, 'zoo');
    await mkdir(join(zoo, 'tiny'), { recursive: true });
    await refused(
      ['demo', '--pair', 'tiny', '--zoo-dir', join(zoo, 'tiny'), '--run-dir', zoo],
      /--zoo-dir .*zoo\/tiny lies inside --run-dir .*zoo, which this command replaces/,
      [zoo],
    );
    await refused(
      ['bench', 'paper', '--test', '--out', zoo, '--zoo-dir', zoo],
      /--out .*zoo and --zoo-dir .*zoo are the same path/,
      [zoo],
    );
    await refused(
      ['bench', 'baseline', '--fast', '--out', join(zoo, 'tiny', 'bias'), '--zoo-dir', zoo],
      /--out .*bias lies inside --zoo-dir .*zoo, which this command reads/,
      [zoo],
    );
    assert.ok(existsSync(join(zoo, 'tiny')));
  });
});

describe('an existing output needs --force', () => {
  test('export gguf and lora merge refuse an existing output, and replace it with --force', async () => {
    const file = join(root, 'agent.gguf');
    assert.equal(hacrl(['export', 'gguf', '--model', base, '--out', file]).status, 0);
    const exists = /--out .* already exists: pass --force to replace it/;
    await refused(['export', 'gguf', '--model', adapter, '--out', file], exists, [file]);
    const f16 = hacrl(['export', 'gguf', '--model', adapter, '--out', file, '--type', 'f16', '--force']);
    assert.equal(f16.status, 0, f16.stderr);
    assert.equal((await readGgufFileInfo(file)).metadata.general.file_type, 1);

    const merged = join(root, 'merged');
    const merge = ['lora', 'merge', '--adapter', adapter, '--out', merged];
    assert.equal(hacrl(merge).status, 0);
    const first = await hashes(merged);
    await refused(merge, exists, [merged]);
    const other = join(root, 'adapter-2');
    await saveTinyAdapter(other, base, 9);
    const r = hacrl(['lora', 'merge', '--adapter', other, '--out', merged, '--force']);
    assert.equal(r.status, 0, r.stderr);
    assert.notEqual(
      (await hashes(merged))[join(merged, 'model.safetensors')],
      first[join(merged, 'model.safetensors')],
    );
  });

  test('mas warmstart refuses an --out folder that holds something, and replaces it with --force', async () => {
    const out = join(root, 'warm');
    await mkdir(out, { recursive: true });
    await writeFile(join(out, 'notes.txt'), 'mine');
    await refused(['mas', 'warmstart', '--out', out], /--out .*warm already exists: pass --force/, [out]);
    const r = hacrl(['mas', 'warmstart', '--out', out, '--force', '--hidden', '16', '--layers', '1', '--heads', '2']);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(join(out, 'config.json')));
  });

  test('sft refuses an --out folder that holds something before training; an empty one is fine', async () => {
    await refused(['sft', '--out', base, '--steps', '1'], /--out .*base already exists: pass --force/, [base]);
    const empty = await mkdtemp(join(root, 'empty-'));
    const r = hacrl(['sft', '--out', empty, '--lr', '-1']);
    assert.doesNotMatch(r.stderr, /already exists/);
  });
});

describe('a SIGKILLed export', () => {
  test('leaves no file under the final name, and an existing file as it was', async () => {
    const file = join(root, 'killed.gguf');
    const marker = join(root, 'stalled');
    const args = ['export', 'gguf', '--model', adapter, '--out', file];
    // The export stops for good after the first part of its temporary file is written, and is killed there.
    await hacrlKilledAt(args, marker, { [STALL_ENV]: marker });
    assert.ok(!existsSync(file), 'no file under the final name');
    const partial = (await readdir(root)).filter((n) => n.startsWith('.killed.gguf.'));
    assert.equal(partial.length, 1, 'the half-written temporary file is beside it, under another name');
    assert.ok((await stat(join(root, partial[0]!))).size > 0);

    assert.equal(hacrl(args).status, 0);
    const whole = await hashes(file);
    await rm(marker);
    await hacrlKilledAt([...args, '--force'], marker, { [STALL_ENV]: marker });
    assert.deepEqual(await hashes(file), whole, 'the earlier export is intact');
    assert.ok(((await readGgufFileInfo(file)).fullTensorInfo?.length ?? 0) > 0, 'the file still reads as GGUF');
  });
});

describe('non-finite weights are never exported, merged or served', () => {
  const overflow = join(root, 'overflow');
  before(async () => {
    // Finite adapters whose product overflows: every merged q_proj value is 2·(1e20)²·scale = Inf in float32.
    const agent = await loadPretrained(base);
    const adapters = LoraAdapters.init(
      agent.model.cfg,
      { rank: 2, alpha: 2, dropout: 0, targets: ['q_proj'] },
      base,
      1,
    );
    for (const t of adapters.params.values()) t.data.fill(1e20);
    await savePretrained(overflow, { ...agent, model: adapt(agent.model, adapters) });
  });
  const names = /tensor "model\.layers\.0\.self_attn\.q_proj\.weight" has \d+ of \d+ values that are NaN or infinite/;

  test("loading the adapter folder (serve's load) is refused naming the weight and the file", async () => {
    await assert.rejects(loadPretrained(overflow), (e: Error) => {
      assert.match(e.message, names);
      assert.ok(e.message.includes(join(overflow, ADAPTER_WEIGHTS)), e.message);
      return true;
    });
  });

  test('export gguf and lora merge refuse it and write nothing', async () => {
    const file = join(root, 'overflow.gguf');
    await refused(['export', 'gguf', '--model', overflow, '--out', file], names, [overflow]);
    assert.ok(!existsSync(file));
    const out = join(root, 'overflow-merged');
    await refused(['lora', 'merge', '--adapter', overflow, '--out', out], names, [overflow]);
    assert.ok(!existsSync(out));
  });

  test('export gguf --type f16 refuses weights beyond f16 range (they would become infinities)', async () => {
    const big = join(root, 'big');
    const agent = await loadPretrained(base);
    agent.model.p('model.layers.0.mlp.up_proj.weight').data[7] = 1e5;
    await savePretrained(big, agent);
    await refused(
      ['export', 'gguf', '--model', big, '--out', join(root, 'big.gguf'), '--type', 'f16'],
      /refusing to write non-finite weights as f16: tensor "blk\.0\.ffn_up\.weight" has 1 of \d+ values/,
      [big],
    );
    assert.equal(hacrl(['export', 'gguf', '--model', big, '--out', join(root, 'big.gguf')]).status, 0);
  });
});
