// Run folders: atomic checkpoints with keep-last-K and a latest pointer, half-written folders ignored, metrics cut
// back to the resumed step, and a train state that round-trips bit for bit.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { AdamW, type AdamWState } from '../src/optim/adamw.js';
import { LATEST_FILE, readLatestPointer } from '../src/run/checkpoints.js';
import { findLatestCheckpoint, RunFolder } from '../src/run/run-folder.js';
import { loadTrainState, saveTrainState, type TrainState } from '../src/run/train-state.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { randn, mulberry32 } from './helpers.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-run-folder-'));
after(() => rm(root, { recursive: true, force: true }));

let runs = 0;
/** A fresh run folder under the test's temporary root. */
async function newRun(config: unknown = { steps: 10 }): Promise<RunFolder> {
  const run = new RunFolder(join(root, `run-${runs++}`));
  await run.init(config);
  return run;
}

/** A checkpoint filler writing one file that records its step. */
const note = (step: number) => (dir: string) => writeFile(join(dir, 'note.txt'), `step ${step}\n`);

test('init writes the resolved config; a checkpoint is published whole with the latest pointer', async () => {
  const run = await newRun({ algorithm: 'grpo', steps: 10 });
  assert.deepEqual(await run.readConfig(), { algorithm: 'grpo', steps: 10 });
  assert.equal(await run.latestCheckpoint(), null);
  const ref = await run.commitCheckpoint(3, note(3), 2);
  assert.deepEqual(ref, { step: 3, dir: join(run.dir, 'checkpoints', 'step-000003') });
  assert.equal(await readFile(join(ref.dir, 'note.txt'), 'utf8'), 'step 3\n');
  assert.equal(await readLatestPointer(run.path('checkpoints')), 'step-000003');
  assert.deepEqual((await readdir(run.path('checkpoints'))).sort(), [LATEST_FILE, 'step-000003']);
  assert.deepEqual(await findLatestCheckpoint(run.dir), ref);
});

test('a checkpoint whose writing fails leaves nothing behind and the previous one stays latest', async () => {
  const run = await newRun();
  await run.commitCheckpoint(1, note(1), 3);
  const failing = async (dir: string): Promise<void> => {
    await writeFile(join(dir, 'half.bin'), 'x');
    throw new Error('disk full');
  };
  await assert.rejects(run.commitCheckpoint(2, failing, 3), /disk full/);
  assert.deepEqual((await readdir(run.path('checkpoints'))).sort(), [LATEST_FILE, 'step-000001']);
  assert.equal((await run.latestCheckpoint())?.step, 1);
  assert.equal(await readLatestPointer(run.path('checkpoints')), 'step-000001');
});

test('only the last K checkpoints are kept; a step written again replaces its folder', async () => {
  const run = await newRun();
  for (const step of [10, 20, 30, 40, 50]) await run.commitCheckpoint(step, note(step), 2);
  assert.deepEqual((await readdir(run.path('checkpoints'))).sort(), [LATEST_FILE, 'step-000040', 'step-000050']);
  await run.commitCheckpoint(50, (dir) => writeFile(join(dir, 'again.txt'), 'again'), 2);
  assert.deepEqual(await readdir(join(run.path('checkpoints'), 'step-000050')), ['again.txt']);
  assert.deepEqual((await readdir(run.path('checkpoints'))).sort(), [LATEST_FILE, 'step-000040', 'step-000050']);
});

test('a half-written (temporary) checkpoint folder is ignored and cleaned up by the next commit', async () => {
  const run = await newRun();
  await run.commitCheckpoint(5, note(5), 3);
  // What a crash between writing and renaming leaves: a temporary sibling with a later step and partial files.
  const half = join(run.path('checkpoints'), '.step-000009.tmp-4242-deadbeef');
  await mkdir(join(half, 'agents'), { recursive: true });
  await writeFile(join(half, 'state.json'), '{"step": 9');
  assert.deepEqual(await findLatestCheckpoint(run.dir), { step: 5, dir: join(run.path('checkpoints'), 'step-000005') });
  await run.commitCheckpoint(6, note(6), 3);
  const names = await readdir(run.path('checkpoints'));
  assert.ok(!names.some((n) => n.startsWith('.')), names.join(', '));
  assert.equal((await findLatestCheckpoint(run.dir))?.step, 6);
});

test('committing an earlier step drops the checkpoints of an abandoned continuation', async () => {
  const run = await newRun();
  for (const step of [1, 2, 3]) await run.commitCheckpoint(step, note(step), 5);
  await run.commitCheckpoint(2, note(2), 5);
  assert.deepEqual((await readdir(run.path('checkpoints'))).sort(), [LATEST_FILE, 'step-000001', 'step-000002']);
  assert.equal(await readLatestPointer(run.path('checkpoints')), 'step-000002');
});

test('on resume the logs are cut back to the resumed step, equal to an uninterrupted run', async () => {
  const metricsRow = (step: number) => ({ step, loss: 1 / (step + 1), reward: { mean: step / 10 } });
  const samplesRows = (step: number) => [0, 1].map((i) => ({ step, i, response: `r${step}.${i}`, gold: '4' }));

  const straight = await newRun();
  for (let step = 1; step <= 6; step++) {
    await straight.appendMetrics(metricsRow(step));
    await straight.appendSamples(samplesRows(step));
  }

  const crashed = await newRun();
  for (let step = 1; step <= 5; step++) {
    await crashed.appendMetrics(metricsRow(step));
    await crashed.appendSamples(samplesRows(step));
  }
  // The crash hit during the append of step 6's metrics: the file ends in a torn line.
  await writeFile(crashed.path('metrics'), '{"step": 6, "lo', { flag: 'a' });
  await crashed.truncateLogsAfter(3); // the latest checkpoint was step 3
  const lines = (await readFile(crashed.path('metrics'), 'utf8')).trim().split('\n');
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { step: number }).step),
    [1, 2, 3],
  );
  for (let step = 4; step <= 6; step++) {
    await crashed.appendMetrics(metricsRow(step));
    await crashed.appendSamples(samplesRows(step));
  }
  for (const file of ['metrics', 'samples'] as const)
    assert.equal(await readFile(crashed.path(file), 'utf8'), await readFile(straight.path(file), 'utf8'), file);

  await crashed.truncateLogsAfter(-1); // a fresh start in the same folder
  assert.equal(await readFile(crashed.path('metrics'), 'utf8'), '');
});

test('a damaged line in the middle of a log is reported, not silently dropped', async () => {
  const run = await newRun();
  await writeFile(run.path('metrics'), '{"step": 1}\nnot json\n{"step": 2}\n');
  await assert.rejects(run.truncateLogsAfter(1), /metrics\.jsonl:2: not valid JSON/);
});

const tokenizer = new CharTokenizer({
  alphabet: Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join(''),
  specialTokens: ['<eos>', '<pad>'],
  names: { eos: '<eos>', pad: '<pad>' },
});

/** Moments for every parameter, with the awkward float32 values a real run can hold. */
function moments(params: Map<string, { size: number }>, seed: number): AdamWState {
  const rng = mulberry32(seed);
  const state: AdamWState = { step: 17, m: new Map(), v: new Map() };
  for (const [name, p] of params) {
    const m = randn(p.size, rng, 1e-3);
    const v = randn(p.size, rng, 1e-6).map(Math.abs);
    m[0] = 1e-45; // a subnormal
    v[0] = -0;
    state.m.set(name, m);
    state.v.set(name, v);
  }
  return state;
}

const bytes = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

test('the train state round-trips bit for bit through an atomic checkpoint', async () => {
  const run = await newRun();
  const models = [testModel(CONFIGS.llama!, 3), testModel(CONFIGS.gpt2!, 4)];
  const dataRng = new Rng(11);
  const samplingRngs = [new Rng(12), new Rng(13)];
  for (let i = 0; i < 5; i++) [dataRng, ...samplingRngs].forEach((r) => r.next());
  const state: TrainState = {
    step: 42,
    nonFiniteStreak: 1,
    cursor: { epoch: 2, position: 96 },
    rngs: { data: dataRng.state() },
    agents: models.map((model, i) => ({
      name: ['qwen-small', 'gpt2.b'][i]!,
      pretrained: { model, tokenizer, generation: null },
      optimizer: moments(model.params, i),
      rngs: { sampling: samplingRngs[i]!.state() },
    })),
    extra: { capability: [0.25, 0.5], note: 'hacpo', nested: { ok: true, none: null } },
  };
  await run.commitCheckpoint(42, (dir) => saveTrainState(dir, state), 2);
  const latest = await findLatestCheckpoint(run.dir);
  assert.equal(latest?.step, 42);
  const back = await loadTrainState(latest!.dir);

  assert.deepEqual(
    [back.step, back.nonFiniteStreak, back.cursor, back.rngs, back.extra],
    [state.step, state.nonFiniteStreak, state.cursor, state.rngs, state.extra],
  );
  assert.equal(back.agents.length, 2);
  for (const [i, a] of back.agents.entries()) {
    const want = state.agents[i]!;
    assert.equal(a.name, want.name);
    assert.deepEqual(a.rngs, want.rngs);
    assert.deepEqual([...a.pretrained.model.params.keys()].sort(), [...want.pretrained.model.params.keys()].sort());
    for (const [name, p] of want.pretrained.model.params)
      assert.ok(bytes(a.pretrained.model.p(name).data).equals(bytes(p.data)), `${want.name} weight ${name}`);
    assert.equal(a.optimizer.step, want.optimizer.step);
    for (const which of ['m', 'v'] as const)
      for (const [name, x] of want.optimizer[which])
        assert.ok(bytes(a.optimizer[which].get(name)!).equals(bytes(x)), `${want.name} ${which} of ${name}`);
    assert.deepEqual(a.pretrained.tokenizer.encode('12+30='), tokenizer.encode('12+30='));
    // The restored pieces plug back into the live objects and continue the same random sequence.
    new AdamW(a.pretrained.model.params).load(a.optimizer);
    const resumed = Rng.fromState(a.rngs.sampling!);
    const original = Rng.fromState(want.rngs.sampling!);
    assert.deepEqual([resumed.next(), resumed.next()], [original.next(), original.next()]);
  }
  // The checkpoint's agent folders are ordinary Hugging Face folders; the optimizer files sit outside them.
  const dir = latest!.dir;
  assert.deepEqual((await readdir(dir)).sort(), ['agents', 'optimizer', 'state.json']);
  assert.deepEqual((await readdir(join(dir, 'optimizer'))).sort(), ['gpt2.b.safetensors', 'qwen-small.safetensors']);
  assert.ok((await readdir(join(dir, 'agents', 'qwen-small'))).includes('model.safetensors'));
});

test('an optimizer that has not stepped yet and an empty extra round-trip too', async () => {
  const dir = join(root, 'fresh-state');
  const model = testModel(CONFIGS.qwen2!, 5);
  const state: TrainState = {
    step: 0,
    nonFiniteStreak: 0,
    cursor: { epoch: 0, position: 0 },
    rngs: {},
    agents: [
      {
        name: 'a',
        pretrained: { model, tokenizer, generation: null },
        optimizer: new AdamW(model.params).state(),
        rngs: {},
      },
    ],
    extra: {},
  };
  await saveTrainState(dir, state);
  const back = await loadTrainState(dir);
  assert.deepEqual(back.agents[0]!.optimizer, { step: 0, m: new Map(), v: new Map() });
  assert.deepEqual(back.extra, {});
});

test('invalid train states are refused when saved and when loaded, naming what is wrong', async () => {
  const model = testModel(CONFIGS.qwen2!, 5);
  const agent = {
    name: 'a',
    pretrained: { model, tokenizer, generation: null },
    optimizer: new AdamW(model.params).state(),
  };
  const base: TrainState = {
    step: 1,
    nonFiniteStreak: 0,
    cursor: { epoch: 0, position: 0 },
    rngs: {},
    agents: [],
    extra: {},
  };
  await assert.rejects(
    saveTrainState(join(root, 'bad-1'), { ...base, rngs: { data: [0, 0, 0, 0] } }),
    /train state is invalid:[\s\S]*an RNG state cannot be all zeros/,
  );
  await assert.rejects(
    saveTrainState(join(root, 'bad-2'), { ...base, extra: { loss: NaN } }),
    /train state is invalid:[\s\S]*extra\.loss/,
  );
  await assert.rejects(
    saveTrainState(join(root, 'bad-3'), {
      ...base,
      agents: [
        { ...agent, rngs: {} },
        { ...agent, rngs: {} },
      ],
    }),
    /agent names must be unique/,
  );
  const dir = join(root, 'bad-4');
  await mkdir(dir);
  await writeFile(join(dir, 'state.json'), JSON.stringify({ format: 'hacrl-train-state', version: 2 }));
  await assert.rejects(loadTrainState(dir), /state\.json is invalid/);
});
