// Untrusted model folders: sizes bounded and checked against the weight files before anything is allocated, special
// ids inside the vocabulary, non-finite weights refused, chat templates bounded; plus a seeded fuzz loop over the
// safetensors and config.json readers.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { writeCheckpoint } from '../src/model/checkpoint.js';
import { parseHfConfig, writeHfConfig } from '../src/model/hf-config.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { parseSafetensors, serializeSafetensors } from '../src/model/safetensors.js';
import { loadModel, saveModel, tensorsForCheckpoint } from '../src/model/weights.js';
import { ChatTemplate, MAX_TEMPLATE_MS } from '../src/tokenizer/chat-template.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { rawFile } from './helpers.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-folder-limits-'));
after(() => rm(root, { recursive: true, force: true }));

/** A saved tiny llama folder; `edit` rewrites its config.json. */
async function folder(name: string, edit: (c: Record<string, unknown>) => void = () => {}): Promise<string> {
  const dir = join(root, name);
  await saveModel(dir, testModel(CONFIGS.llama!, 1));
  const cfg = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  edit(cfg);
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg));
  return dir;
}

describe('config.json sizes', () => {
  test('absurd sizes are refused by name before anything is built', () => {
    const start = performance.now();
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.llama, num_hidden_layers: 100_000_000 }, 'cfg'),
      /cfg: num_hidden_layers is 100000000, above the limit of 1024/,
    );
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.gpt2, n_layer: 100_000_000 }, 'cfg'),
      /cfg: n_layer is 100000000, above the limit/,
    );
    assert.throws(() => parseHfConfig({ ...CONFIGS.llama, vocab_size: 1e9 }, 'cfg'), /vocab_size is 1000000000/);
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.llama, eos_token_id: 5000 }, 'cfg'),
      /eos_token_id 5000 is outside the vocabulary \(vocab_size 97\)/,
    );
    assert.ok(performance.now() - start < 1000);
  });

  test('a config that claims more than the weight files hold is refused before reading them', async () => {
    const more = await folder('more-layers', (c) => (c.num_hidden_layers = 40));
    await assert.rejects(loadModel(more), /missing tensor "model\.layers\.\d+\.input_layernorm\.weight"/);
    const wider = await folder('wider', (c) => (c.intermediate_size = 200_000));
    await assert.rejects(
      loadModel(wider),
      /tensor "model\.layers\.0\.mlp\.gate_proj\.weight" has shape \[128, 64\] in the weight files, config\.json needs \[200000, 64\]/,
    );
    assert.ok(await loadModel(await folder('as-saved')), 'the unedited folder loads');
  });

  test('NaN or infinite weights are refused at load, naming the tensor', async () => {
    const model = testModel(CONFIGS.llama!, 1);
    model.p('model.norm.weight').data[3] = Number.NaN;
    model.p('model.norm.weight').data[4] = Number.POSITIVE_INFINITY;
    const dir = join(root, 'nan');
    // Written below saveModel, which refuses such weights: a folder from elsewhere may hold them.
    await writeCheckpoint(dir, tensorsForCheckpoint(model));
    await writeHfConfig(dir, model.cfg);
    await assert.rejects(loadModel(dir), /tensor "model\.norm\.weight" has 2 of 64 values that are NaN or infinite/);
  });

  test('special ids outside the vocabulary are refused (tokenizer and generation_config.json)', async () => {
    const dir = join(root, 'gen-eos');
    const alphabet = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
    const tokenizer = new CharTokenizer({ alphabet, specialTokens: ['<eos>', '<pad>'], names: { eos: '<eos>' } });
    await savePretrained(dir, { model: testModel(CONFIGS.llama!, 1), tokenizer, generation: null });
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [96, 4000] }));
    await assert.rejects(
      loadPretrained(dir),
      /generation_config\.json eos_token_id 4000 is outside the model's vocabulary/,
    );
  });
});

describe('chat templates from a folder run under limits', () => {
  const render = (src: string): string =>
    new ChatTemplate(src, {}, 'folder').render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true });

  test('nested long loops stop at the limit; a huge range is refused at once; a real template renders', () => {
    let start = performance.now();
    assert.throws(
      () => render('{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}'),
      /chat template of folder failed: it ran past/,
    );
    assert.ok(performance.now() - start < MAX_TEMPLATE_MS + 1000);
    start = performance.now();
    assert.throws(() => render('{% for i in range(1000000000) %}x{% endfor %}'), /range\(\) of 1000000000 items/);
    assert.ok(performance.now() - start < 500);
    assert.throws(() => render('{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}'), /chat template of folder/);
    assert.equal(
      render(
        '{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}{% for i in range(3) %}{{ i }}{% endfor %}',
      ),
      'user: hi012',
    );
  });
});

describe('fuzz (seeded, bounded): the readers refuse bad bytes with an error, never a crash or a hang', () => {
  test('safetensors files: random bytes and corrupted valid files', () => {
    const rng = new Rng(21);
    const valid = new Uint8Array(
      Buffer.concat(
        serializeSafetensors([
          ['a', { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }],
          ['b', { shape: [4], data: new Float32Array([7, 8, 9, 10]) }],
        ]),
      ),
    );
    const tally = { tried: 0, error: 0, parsed: 0 };
    for (let i = 0; i < 500; i++) {
      let bytes: Uint8Array;
      if (i % 2 === 0) {
        bytes = Uint8Array.from({ length: rng.int(200) }, () => rng.int(256));
        if (i % 4 === 0 && bytes.length >= 8)
          new DataView(bytes.buffer).setBigUint64(0, BigInt(rng.int(bytes.length)), true);
      } else {
        bytes = valid.slice(0, rng.next() < 0.2 ? rng.int(valid.length) : valid.length);
        for (let k = 0; k < 1 + rng.int(4); k++) if (bytes.length) bytes[rng.int(bytes.length)] = rng.int(256);
      }
      tally.tried++;
      // Fewer than 8 bytes, or a header longer than what follows it: no reading of these can be right.
      const claim = bytes.length < 8 ? Infinity : Number(new DataView(bytes.buffer).getBigUint64(0, true));
      const start = performance.now();
      let parsed = false;
      try {
        parseSafetensors(bytes, 'fuzz');
        parsed = true;
      } catch (e) {
        assert.ok(e instanceof Error && e.message.length > 0, `input ${i}: ${String(e)}`);
        tally.error++;
      }
      if (parsed) {
        assert.ok(
          8 + claim <= bytes.length,
          `input ${i}: ${bytes.length} bytes claiming a ${claim}-byte header parsed`,
        );
        tally.parsed++;
      }
      assert.ok(performance.now() - start < 200, `input ${i} was slow`);
    }
    console.log(`safetensors fuzz: ${JSON.stringify(tally)}`);
  });

  test('safetensors files with one seeded defect each are all refused; harmless changes load the exact bytes', () => {
    // Four tensors laid end to end with no slack, so cutting any byte off the file cuts a header or a tensor.
    const layout: [string, string, number[]][] = [
      ['a', 'F32', [2, 3]],
      ['b', 'I32', [4]],
      ['c', 'F32', [5]],
      ['d', 'U8', [3]],
    ];
    const size: Record<string, number> = { F64: 8, F32: 4, I32: 4, F16: 2, BF16: 2, I16: 2, I8: 1, U8: 1, BOOL: 1 };
    const rng = new Rng(23);
    const pick = <T>(xs: readonly T[]): T => xs[rng.int(xs.length)]!;
    const defects = [
      'truncated',
      'overlap',
      'dtype size',
      'unknown dtype',
      'huge shape',
      'bad shape',
      'offsets out of range',
      'bad offsets',
      'header length',
    ] as const;
    const harmless = ['data byte', 'metadata', 'key order'] as const;
    const seen: Record<string, number> = {};
    for (let i = 0; i < 400; i++) {
      const header: Record<string, Record<string, unknown>> = {};
      let end = 0;
      for (const [name, dtype, shape] of layout) {
        const n = shape.reduce((x, y) => x * y, 1) * size[dtype]!;
        header[name] = { dtype, shape, data_offsets: [end, end + n] };
        end += n;
      }
      const data = Uint8Array.from({ length: end }, () => rng.int(256));
      const kind = i % 4 === 3 ? pick(harmless) : pick(defects);
      seen[kind] = (seen[kind] ?? 0) + 1;
      const [name] = pick(layout);
      const t = header[name]!;
      const [begin, stop] = t.data_offsets as [number, number];
      let file: Uint8Array | null = null;
      switch (kind) {
        case 'overlap': {
          // Another tensor moved to start inside this one, same length.
          const other = header[pick(layout.filter(([n]) => n !== name))[0]]!;
          const [ob, oe] = other.data_offsets as [number, number];
          const at = begin + rng.int(stop - begin);
          other.data_offsets = [at, at + oe - ob];
          break;
        }
        case 'dtype size':
          t.dtype = pick(Object.keys(size).filter((d) => size[d] !== size[t.dtype as string]));
          break;
        case 'unknown dtype':
          t.dtype = pick(['Q4', 'f32', '', 'F8_E4M3X', 4, null]);
          break;
        case 'huge shape':
          t.shape = pick([[2 ** 31, 2 ** 31], [2 ** 53], [1e20], [2 ** 32, 2 ** 32, 4], [Number.MAX_SAFE_INTEGER, 2]]);
          break;
        case 'bad shape':
          t.shape = pick([[-1], [1.5], ['2'], null, {}, [2, -3]]);
          break;
        case 'offsets out of range':
          t.data_offsets = [begin + end, stop + end];
          break;
        case 'bad offsets':
          t.data_offsets = pick([[stop, begin], [begin], [-4, stop - begin - 4], [begin, stop + 0.5], null, 'x']);
          break;
        case 'data byte':
          data[rng.int(end)] ^= 1 + rng.int(255);
          break;
        case 'metadata':
          header.__metadata__ = { format: 'pt', note: 'ü' };
          break;
        case 'key order': {
          const keys = rng.shuffle(Object.keys(header));
          file = rawFile(Object.fromEntries(keys.map((k) => [k, header[k]])), data);
          break;
        }
      }
      file ??= rawFile(header, data);
      if (kind === 'truncated') file = file.slice(0, rng.int(file.length));
      if (kind === 'header length') {
        // Past the end of the file, or short of the JSON's closing brace.
        const json = Buffer.byteLength(JSON.stringify(header));
        const claim = rng.next() < 0.5 ? file.length - 8 + 1 + rng.int(1000) : 1 + rng.int(json - 1);
        new DataView(file.buffer, file.byteOffset).setBigUint64(0, BigInt(claim), true);
      }
      if (kind === 'data byte' || kind === 'metadata' || kind === 'key order') {
        const parsed = parseSafetensors(file, 'fuzz').tensors;
        assert.deepEqual([...parsed.keys()].sort(), ['a', 'b', 'c', 'd'], `input ${i} (${kind})`);
        for (const [n, dtype, shape] of layout) {
          const got = parsed.get(n)!;
          assert.deepEqual([got.dtype, got.shape], [dtype, shape], `input ${i} (${kind}): ${n}`);
          const [b, e] = header[n]!.data_offsets as [number, number];
          if (dtype === 'F32')
            assert.ok(
              Buffer.from(new Uint8Array(got.data.buffer, got.data.byteOffset, e - b)).equals(data.subarray(b, e)),
            );
          else assert.equal(got.data.length, (e - b) / size[dtype]!);
        }
      } else assert.throws(() => parseSafetensors(file, 'fuzz'), /fuzz/, `input ${i} (${kind}) was accepted`);
    }
    // Every kind came up, so each is checked.
    assert.deepEqual(Object.keys(seen).sort(), [...defects, ...harmless].sort());
  });

  test('config.json objects with random field values', () => {
    const rng = new Rng(22);
    const values = [0, -1, 1.5, 1e9, 2 ** 53, Number.MAX_SAFE_INTEGER, 'x', null, true, [], {}, [1, 1e9], 96, 97];
    const tally = { tried: 0, error: 0, parsed: 0 };
    for (let i = 0; i < 500; i++) {
      const base = { ...(i % 2 === 0 ? CONFIGS.llama : CONFIGS.gpt2) } as Record<string, unknown>;
      const keys = Object.keys(base);
      for (let k = 0; k < 1 + rng.int(3); k++) base[keys[rng.int(keys.length)]!] = values[rng.int(values.length)];
      tally.tried++;
      try {
        const cfg = parseHfConfig(base, 'fuzz');
        assert.ok(cfg.layers <= 1024 && cfg.vocabSize <= 4_194_304 && cfg.eosIds.every((e) => e < cfg.vocabSize));
        tally.parsed++;
      } catch (e) {
        assert.ok(e instanceof Error && /fuzz/.test(e.message), `input ${i}: ${String(e)}`);
        tally.error++;
      }
    }
    console.log(`config.json fuzz: ${JSON.stringify(tally)}`);
  });
});
