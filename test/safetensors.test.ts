import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CheckpointReader, INDEX_FILE, readCheckpoint, SINGLE_FILE, writeCheckpoint } from '../src/model/checkpoint.js';
import { f32ToBf16 } from '../src/tensor/half.js';
import {
  parseSafetensors,
  readSafetensors,
  SafetensorsReader,
  serializeSafetensors,
  writeSafetensors,
  type TensorData,
  type TensorToWrite,
} from '../src/model/safetensors.js';
import { writeFileAtomic } from '../src/util/atomic-write.js';
import { mulberry32, rawFile } from './helpers.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-st-'));
after(() => rm(root, { recursive: true, force: true }));
let dirCount = 0;
async function freshDir(): Promise<string> {
  const d = join(root, `d${dirCount++}`);
  await mkdir(d);
  return d;
}

/** Float32 values with uniformly random bit patterns: NaNs with payloads, infinities, subnormals, -0. */
function randomBitsF32(n: number, seed: number): Float32Array {
  const r = mulberry32(seed);
  const bits = new Uint32Array(n);
  for (let i = 0; i < n; i++) bits[i] = Math.floor(r() * 2 ** 32);
  return new Float32Array(bits.buffer);
}

function bytesOf(d: TensorData): Uint8Array {
  return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
}

test('F32/I32/I64 tensors round-trip bit for bit, with metadata', async () => {
  const r = mulberry32(7);
  const tensors: [string, TensorToWrite][] = [
    ['model.embed_tokens.weight', { shape: [37, 11], data: randomBitsF32(37 * 11, 1) }],
    ['layers.0.bias', { shape: [5], data: randomBitsF32(5, 2) }],
    ['scalar', { shape: [], data: new Float32Array([Math.PI]) }],
    ['empty', { shape: [0, 3], data: new Float32Array(0) }],
    ['ints', { shape: [2, 3], data: Int32Array.from({ length: 6 }, () => Math.floor(r() * 2 ** 32) - 2 ** 31) }],
    ['longs', { shape: [3], data: BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n, 42n]) }],
  ];
  const path = join(root, 'roundtrip.safetensors');
  await writeSafetensors(path, tensors, { metadata: { format: 'pt', note: 'ünï' } });
  const back = await readSafetensors(path);
  assert.deepEqual(back.metadata, { format: 'pt', note: 'ünï' });
  assert.equal(back.tensors.size, tensors.length);
  for (const [name, t] of tensors) {
    const got = back.tensors.get(name);
    assert.ok(got, name);
    assert.deepEqual(got.shape, t.shape, name);
    assert.equal(got.data.constructor, t.data.constructor, name);
    assert.deepEqual(bytesOf(got.data), bytesOf(t.data), name);
  }
  assert.equal(back.tensors.get('ints')!.dtype, 'I32');
  assert.equal(back.tensors.get('longs')!.dtype, 'I64');
  // The in-memory parser agrees with the file reader.
  const mem = parseSafetensors(await readFile(path));
  for (const [name, t] of mem.tensors) assert.deepEqual(bytesOf(t.data), bytesOf(back.tensors.get(name)!.data), name);
});

test('the header is laid out byte for byte as the reference implementation writes it', () => {
  // The serialize test of huggingface/safetensors: one zero F32 tensor [1,2,3]; its 64-byte header needs no padding.
  const [header, data] = serializeSafetensors([['attn.0', { shape: [1, 2, 3], data: new Float32Array(6) }]]);
  const json = '{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}';
  assert.deepEqual(header, Buffer.concat([Buffer.from([64, 0, 0, 0, 0, 0, 0, 0]), Buffer.from(json)]));
  assert.equal(data!.byteLength, 24);
  // Two bytes shorter: padded with two spaces back to a multiple of 8.
  const [padded] = serializeSafetensors([['attn', { shape: [1, 2, 3], data: new Float32Array(6) }]]);
  assert.deepEqual(
    padded,
    Buffer.concat([Buffer.from([64, 0, 0, 0, 0, 0, 0, 0]), Buffer.from(json.replace('attn.0', 'attn') + '  ')]),
  );
});

test('tensors are laid out by decreasing element size, then name; metadata comes first', () => {
  const chunks = serializeSafetensors(
    [
      ['b', { shape: [1], data: new Float32Array([1]) }],
      ['z', { shape: [1], data: new BigInt64Array([1n]) }],
      ['a', { shape: [2], data: new Float32Array([1, 2]) }],
    ],
    { metadata: { k: 'v' } },
  );
  const text = Buffer.from(chunks[0]!.subarray(8)).toString().trimEnd();
  assert.deepEqual(Object.keys(JSON.parse(text) as object), ['__metadata__', 'z', 'a', 'b']);
  const parsed = JSON.parse(text) as Record<string, { data_offsets: number[] }>;
  assert.deepEqual(parsed['z']!.data_offsets, [0, 8]);
  assert.deepEqual(parsed['a']!.data_offsets, [8, 16]);
  assert.deepEqual(parsed['b']!.data_offsets, [16, 20]);
});

test('F16 decodes exactly, including subnormals, infinities and NaN', async () => {
  const cases: [number, number][] = [
    [0x3c00, 1],
    [0xc000, -2],
    [0x3555, 0.333251953125],
    [0x7bff, 65504],
    [0x0400, 2 ** -14],
    [0x0001, 2 ** -24],
    [0x03ff, 1023 * 2 ** -24],
    [0x8000, -0],
    [0x7c00, Infinity],
    [0xfc00, -Infinity],
  ];
  const bits = Uint16Array.from([...cases.map((c) => c[0]), 0x7e00]);
  const path = join(root, 'f16.safetensors');
  await writeFile(
    path,
    rawFile(
      { h: { dtype: 'F16', shape: [bits.length], data_offsets: [0, bits.byteLength] } },
      new Uint8Array(bits.buffer),
    ),
  );
  const t = (await readSafetensors(path)).tensors.get('h')!;
  assert.equal(t.dtype, 'F16');
  assert.ok(t.data instanceof Float32Array);
  cases.forEach(([, want], i) =>
    assert.ok(Object.is(t.data[i], want), `0x${cases[i]![0].toString(16)} -> ${t.data[i]}, want ${want}`),
  );
  assert.ok(Number.isNaN(t.data[cases.length]));
});

test('BF16 decodes exactly and F32 -> BF16 rounds to nearest even', async () => {
  const cases: [number, number][] = [
    [0x3f80, 1],
    [0x4049, 3.140625],
    [0xc2f7, -123.5],
    [0x0001, 2 ** -133],
    [0x7f80, Infinity],
    [0x8000, -0],
  ];
  const bits = Uint16Array.from(cases.map((c) => c[0]));
  const path = join(root, 'bf16.safetensors');
  await writeFile(
    path,
    rawFile({ b: { dtype: 'BF16', shape: [2, 3], data_offsets: [0, 12] } }, new Uint8Array(bits.buffer)),
  );
  const t = (await readSafetensors(path)).tensors.get('b')!;
  assert.deepEqual(t.shape, [2, 3]);
  cases.forEach(([, want], i) => assert.ok(Object.is(t.data[i], want), `${t.data[i]} vs ${want}`));

  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (ties to even: 1); 1 + 3*2^-8 is halfway up to 1 + 2^-6.
  const src = new Float32Array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.14159, -Infinity, NaN, 3.4e38]);
  const out = f32ToBf16(src);
  assert.deepEqual([...out.subarray(0, 4)], [0x3f80, 0x3f82, 0x4049, 0xff80]);
  assert.equal(out[4]! & 0x7fc0, 0x7fc0, 'NaN stays a quiet NaN');
  assert.equal(out[5], 0x7f80, '3.4e38 rounds up to infinity past the largest bf16');
  const wpath = join(root, 'bf16w.safetensors');
  await writeSafetensors(wpath, [['w', { shape: [6], data: src }]], { floatDtype: 'BF16' });
  const w = (await readSafetensors(wpath)).tensors.get('w')!;
  assert.equal(w.dtype, 'BF16');
  assert.deepEqual([...w.data.subarray(0, 4)], [1, 1.015625, 3.140625, -Infinity]);
});

test('a sharded checkpoint is written with its index, read back, and replaced cleanly', async () => {
  const dir = await freshDir();
  const tensors: [string, TensorToWrite][] = Array.from({ length: 10 }, (_, i) => [
    `model.layers.${i}.w`,
    { shape: [10, 100], data: randomBitsF32(1000, 100 + i) },
  ]);
  const files = await writeCheckpoint(dir, tensors, { maxShardBytes: 10_000 });
  assert.deepEqual(files, [1, 2, 3, 4, 5].map((i) => `model-0000${i}-of-00005.safetensors`).concat(INDEX_FILE));
  const index = JSON.parse(await readFile(join(dir, INDEX_FILE), 'utf8')) as {
    metadata: { total_size: number };
    weight_map: Record<string, string>;
  };
  assert.equal(index.metadata.total_size, 40_000);
  assert.equal(index.weight_map['model.layers.3.w'], 'model-00002-of-00005.safetensors');
  assert.deepEqual(Object.keys(index.weight_map), [...Object.keys(index.weight_map)].sort());

  const back = await readCheckpoint(dir);
  assert.equal(back.size, 10);
  for (const [name, t] of tensors) assert.deepEqual(bytesOf(back.get(name)!.data), bytesOf(t.data), name);
  const reader = await CheckpointReader.open(dir);
  assert.deepEqual(reader.info('model.layers.9.w').offsets, [4000, 8000]);
  assert.equal((await reader.readFloat32('model.layers.0.w')).data.length, 1000);
  await assert.rejects(reader.read('nope'), /tensor "nope" not found in the checkpoint/);
  await reader.close();

  // Saving again unsharded removes the shards and the index, and no temporary file is left behind.
  assert.deepEqual(await writeCheckpoint(dir, tensors.slice(0, 2)), [SINGLE_FILE]);
  assert.deepEqual((await readdir(dir)).sort(), [SINGLE_FILE]);
  assert.equal((await readCheckpoint(dir)).size, 2);
  // A tensor bigger than the limit gets a shard of its own.
  const big = await writeCheckpoint(dir, tensors.slice(0, 3), { maxShardBytes: 1000 });
  assert.equal(big.length, 4);
  assert.deepEqual((await readdir(dir)).sort(), [...big].sort());
});

async function expectOpenError(bytes: Uint8Array, pattern: RegExp, name: string): Promise<void> {
  const path = join(root, `${name}.safetensors`);
  await writeFile(path, bytes);
  await assert.rejects(SafetensorsReader.open(path), (e: Error) => {
    assert.match(e.message, pattern);
    assert.ok(e.message.includes(path), `names the file: ${e.message}`);
    return true;
  });
}

test('bad files fail with errors that name the file and the tensor', async () => {
  const good = Buffer.concat(serializeSafetensors([['w', { shape: [4], data: new Float32Array([1, 2, 3, 4]) }]]));
  await expectOpenError(good.subarray(0, good.byteLength - 4), /tensor "w" .*out of range.*truncated/, 'truncated');
  await expectOpenError(good.subarray(0, 20), /truncated: the header claims/, 'cut-header');
  await expectOpenError(good.subarray(0, 5), /not a safetensors file/, 'tiny');
  await expectOpenError(
    rawFile({ w: { dtype: 'Q8', shape: [2], data_offsets: [0, 2] } }, new Uint8Array(2)),
    /tensor "w" .*unknown or unsupported dtype "Q8"/,
    'dtype',
  );
  await expectOpenError(
    rawFile({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)),
    /tensor "w".*hold 8 bytes but F32\[3\] needs 12/,
    'size',
  );
  await expectOpenError(
    rawFile({ w: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, new Uint8Array(8)),
    /tensor "w".*\[8, 16\] are out of range/,
    'range',
  );
  await expectOpenError(
    rawFile(
      { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } },
      new Uint8Array(12),
    ),
    /"a" and "b" overlap/,
    'overlap',
  );
  await expectOpenError(
    rawFile({ w: { dtype: 'F32', shape: [-1], data_offsets: [0, 0] } }, new Uint8Array(0)),
    /tensor "w".*shape must be/,
    'shape',
  );
  const huge = Buffer.alloc(16);
  huge.writeBigUInt64LE(2n ** 40n);
  await expectOpenError(huge, /header length of 1099511627776 bytes, over the 100000000-byte limit/, 'huge');
  const notJson = Buffer.concat([Buffer.from([8, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{not js}')]);
  await expectOpenError(notJson, /ill-formed safetensors header/, 'json');
  await expectOpenError(rawFile([1, 2], new Uint8Array(0)), /not a JSON object/, 'array');
  await expectOpenError(
    rawFile({ __metadata__: { n: 1 } }, new Uint8Array(0)),
    /__metadata__ must be an object of string values/,
    'meta',
  );

  const path = join(root, 'good.safetensors');
  await writeFile(path, good);
  const r = await SafetensorsReader.open(path);
  assert.throws(
    () => r.info('missing'),
    new RegExp(`tensor "missing" not found in ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
  );
  // The file shrinking after open is caught when the tensor is read.
  await truncate(path, 30);
  await assert.rejects(r.read('w'), /cannot read tensor "w" from .*good\.safetensors: unexpected end of file/);
  await r.close();
  await assert.rejects(
    SafetensorsReader.open(join(root, 'absent.safetensors')),
    /cannot open safetensors file .*absent\.safetensors/,
  );
});

test('writing rejects inconsistent tensors', () => {
  assert.throws(
    () => serializeSafetensors([['w', { shape: [2, 2], data: new Float32Array(3) }]]),
    /tensor "w": shape \[2,2\] has 4 elements but data has 3/,
  );
  assert.throws(() => serializeSafetensors([['__metadata__', { shape: [1], data: new Float32Array(1) }]]), /reserved/);
  const t = { shape: [1], data: new Float32Array(1) };
  assert.throws(
    () =>
      serializeSafetensors([
        ['w', t],
        ['w', t],
      ]),
    /tensor "w" is given twice/,
  );
});

test('bad shard indexes fail naming the index, the shard and the tensor', async () => {
  const dir = await freshDir();
  await assert.rejects(
    CheckpointReader.open(dir),
    /no weights in .*: expected model\.safetensors or model\.safetensors\.index\.json/,
  );
  await writeSafetensors(join(dir, 'model-00001-of-00001.safetensors'), [
    ['a', { shape: [1], data: new Float32Array(1) }],
  ]);
  const index = (map: Record<string, string>): Promise<void> =>
    writeFile(join(dir, INDEX_FILE), JSON.stringify({ metadata: {}, weight_map: map }));
  await index({ a: 'model-00001-of-00001.safetensors', b: 'model-00001-of-00001.safetensors' });
  await assert.rejects(
    CheckpointReader.open(dir),
    /puts tensor "b" in model-00001-of-00001\.safetensors, which does not contain it/,
  );
  await index({ a: '../elsewhere.safetensors' });
  await assert.rejects(
    CheckpointReader.open(dir),
    /shard "\.\.\/elsewhere\.safetensors" of tensor "a" is not a plain file name/,
  );
  await index({ a: 'model-00002-of-00002.safetensors' });
  await assert.rejects(CheckpointReader.open(dir), /cannot open safetensors file .*model-00002-of-00002\.safetensors/);
  await writeFile(join(dir, INDEX_FILE), '{"weight_map": 3}');
  await assert.rejects(CheckpointReader.open(dir), /model\.safetensors\.index\.json is invalid/);
});

test('writeFileAtomic replaces whole files and leaves nothing behind on failure', async () => {
  const dir = await freshDir();
  const path = join(dir, 'f.bin');
  await writeFileAtomic(path, 'old contents');
  await writeFileAtomic(path, [Buffer.from('new '), Buffer.from('contents')]);
  assert.equal(await readFile(path, 'utf8'), 'new contents');
  assert.deepEqual(await readdir(dir), ['f.bin']);
  await assert.rejects(writeFileAtomic(join(dir, 'no-such-dir', 'x'), 'data'), /ENOENT/);
  // A target that cannot be replaced (a non-empty folder) fails after the temporary file was written: it is removed.
  await mkdir(join(dir, 'sub', 'inner'), { recursive: true });
  await assert.rejects(writeFileAtomic(join(dir, 'sub'), 'data'));
  assert.deepEqual((await readdir(dir)).sort(), ['f.bin', 'sub']);
});
