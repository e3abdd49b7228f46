// LoRA agents in training: the update loop moves only the adapters (the frozen base and its optimizer state untouched),
// GRPO, GSPO and AT-GRPO per-role runs through the CLI train adapters saved in PEFT format (loadable by `hacrl eval`),
// and a HACPO run of two LoRA agents with different bases and tokenizers, one with dropout and a KL reference, killed
// with SIGKILL and resumed, ends byte-identical to an uninterrupted one.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { LoraAdapters } from '../src/model/lora.js';
import { adapt } from '../src/model/peft.js';
import { loadPretrained } from '../src/model/pretrained.js';
import { readSafetensors } from '../src/model/safetensors.js';
import { AdamW } from '../src/optim/adamw.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { loadTrainState, saveTrainState, type TrainState } from '../src/run/train-state.js';
import { initialState } from '../src/train/learners.js';
import { runUpdates } from '../src/train/policy-updates.js';
import { assertSameCheckpoint, hacrl, hacrlKilledAt, metricRows, TINY_AGENT_FLAGS } from './cli.js';
import { mulberry32, randInt } from './helpers.js';
import { resolveRun } from '../src/train/resolved-run.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-lora-train-'));
after(() => rm(root, { recursive: true, force: true }));
const rewardPath = join(root, 'digits.mjs');
const dir = (name: string): string => join(root, 'agents', name);
const ckpt = (runDir: string, step: number, ...rest: string[]): string =>
  join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`, ...rest);

/** Overrides of a small run of LoRA `agents` (name → base folder) in `runDir`. */
function runArgs(runDir: string, agents: Record<string, string>, extra: string[] = []): string[] {
  return [
    'train',
    '--set',
    ...Object.entries(agents).flatMap(([a, base], i) => [
      `agents.${i}.name=${a}`,
      `agents.${i}.checkpoint=${dir(base)}`,
      `agents.${i}.lora={rank: 4, alpha: 8}`,
    ]),
    `runDir=${runDir}`,
    'data.train=easy:train:64',
    'data.validation=[easy:test:4]',
    'data.template={question}',
    'rollout.promptsPerStep=2',
    'rollout.groupSize=4',
    'rollout.maxNewTokens=12',
    'optim.lr=0.01',
    'reward.math=0',
    `reward.custom=[{path: ${rewardPath}, weight: 1, name: digits}]`,
    'steps=2',
    'eval.every=0',
    'eval.problems=4',
    ...extra,
  ];
}

/** Asserts that `agent`'s checkpoint at `step` is an adapter folder with trained (non-zero) B, and AdamW state only for A and B. */
async function assertTrainedAdapters(runDir: string, agent: string, step: number): Promise<void> {
  const folder = ckpt(runDir, step, 'agents', agent);
  assert.ok(existsSync(join(folder, 'adapter_config.json')), `${agent}: an adapter folder`);
  assert.ok(!existsSync(join(folder, 'model.safetensors')), `${agent}: no copy of the base weights`);
  const { tensors } = await readSafetensors(join(folder, 'adapter_model.safetensors'));
  const bs = [...tensors].filter(([n]) => n.endsWith('lora_B.weight'));
  assert.ok(bs.length > 0 && bs.every(([, t]) => (t.data as Float32Array).some((v) => v !== 0)), `${agent}: B moved`);
  const moments = await readSafetensors(ckpt(runDir, step, 'optimizer', `${agent}.safetensors`));
  const names = [...moments.tensors.keys()];
  assert.equal(names.length, 2 * tensors.size, `${agent}: m and v of every adapter tensor`);
  assert.ok(
    names.every((n) => /^[mv]\..*\.lora_[AB]\.weight$/.test(n)),
    `${agent}: moments of adapters only`,
  );
}

describe('LoRA agents in training', () => {
  before(async () => {
    await writeFile(
      rewardPath,
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    const agents: Record<string, string[]> = {
      char: [...TINY_AGENT_FLAGS, '--steps', '10'],
      bpe: ['--arch', 'gpt2', '--tokenizer', 'bpe', '--bpe-vocab', '300', ...TINY_AGENT_FLAGS, '--steps', '10'],
    };
    for (const [name, flags] of Object.entries(agents)) {
      const r = hacrl(['sft', '--out', dir(name), '--eval-every', '0', '--eval-n', '4', '--train-n', '200', ...flags]);
      assert.equal(r.status, 0, r.stderr);
    }
  });

  test('an update moves the adapters only: the base stays bit-identical and AdamW keeps state for A and B alone', async () => {
    const base = await loadPretrained(dir('char'));
    const before = new Map([...base.model.params].map(([n, t]) => [n, t.data.slice()]));
    const model = adapt(
      base.model,
      LoraAdapters.init(base.model.cfg, { rank: 4, alpha: 8, dropout: 0.1, targets: 'all-linear' }, dir('char'), 1),
    );
    const optimizer = new AdamW(model.trainable, { lr: 0.01 });
    const rng = mulberry32(2);
    const items = [0, 1, 2, 3].map(() => ({
      prompt: [...randInt(5, rng, 0, 10)],
      response: [...randInt(4, rng, 0, 10)],
    }));
    const r = runUpdates(
      model,
      optimizer,
      engine(),
      (i) => items[i]!,
      [
        [0, 1],
        [2, 3],
      ],
      (_, logProbs) => {
        let loss = 0;
        for (const lp of logProbs) for (const v of lp) loss -= v;
        return { loss, grad: logProbs.map((lp) => new Float32Array(lp.length).fill(-1)), stats: {} };
      },
      { clip: 1, lr: 0.01 },
    );
    assert.equal(r.skippedUpdates, 0);
    for (const [n, t] of base.model.params) assert.deepEqual(t.data, before.get(n), `${n} unchanged`);
    const state = optimizer.state();
    assert.deepEqual([...state.m.keys()].sort(), [...model.adapters!.params.keys()].sort());
    assert.ok(
      [...model.adapters!.params].some(([n, t]) => n.includes('lora_B') && t.data.some((v) => v !== 0)),
      'B moved',
    );
  });

  test('LoRA agents on the same checkpoint folder share one frozen base, fresh and resumed', async () => {
    const cfg = parseRunConfig({
      agents: ['a', 'b'].map((name) => ({ name, checkpoint: dir('char'), lora: { rank: 2 } })),
      runDir: join(root, 'shared'),
    });
    const state = await initialState(resolveRun(cfg).agents, cfg.seed);
    const shared = (s: TrainState): void => {
      const [a, b] = s.agents.map((x) => x.pretrained.model);
      for (const [name, t] of a!.params) assert.equal(t.data, b!.params.get(name)!.data, `${name} is one array`);
      assert.notEqual(a!.adapters!.params, b!.adapters!.params, 'adapters of their own');
    };
    shared(state);
    await saveTrainState(join(root, 'shared', 'step-000000'), state);
    shared(await loadTrainState(join(root, 'shared', 'step-000000')));
  });

  for (const algorithm of ['grpo', 'gspo']) {
    test(`${algorithm}: a LoRA agent trains its adapters, saved in PEFT format, and \`hacrl eval\` loads them`, async () => {
      const runDir = join(root, algorithm);
      const baseBytes = await readFile(join(dir('bpe'), 'model.safetensors'));
      const r = hacrl(runArgs(runDir, { a: 'bpe' }, [`algorithm=${algorithm}`]));
      assert.equal(r.status, 0, r.stderr);
      await assertTrainedAdapters(runDir, 'a', 2);
      assert.ok((await readFile(join(dir('bpe'), 'model.safetensors'))).equals(baseBytes), 'the base folder untouched');
      const e = hacrl([
        'eval',
        '--model',
        ckpt(runDir, 2, 'agents', 'a'),
        '--data',
        'easy:test:3',
        '--max-new-tokens',
        '8',
        '--json',
      ]);
      assert.equal(e.status, 0, e.stderr);
    });
  }

  test('hacpo: two LoRA agents with different bases and tokenizers, killed and resumed, end byte-identical', async () => {
    const args = (d: string): string[] =>
      runArgs(d, { c: 'char', g: 'bpe' }, [
        'preset=hacpo',
        'steps=4',
        'checkpoint.every=1',
        'checkpoint.keepLast=10',
        'agents.1.lora.dropout=0.1',
        'optim.klCoef=0.01',
      ]);
    const whole = join(root, 'whole');
    const w = hacrl(args(whole));
    assert.equal(w.status, 0, w.stderr);
    const killed = join(root, 'killed');
    await hacrlKilledAt(args(killed), ckpt(killed, 2, 'state.json'));
    assert.ok(!existsSync(ckpt(killed, 4)), 'killed before the end');
    const resumed = hacrl([...args(killed), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /resuming .* from step [2-3]/);
    for (const a of ['c', 'g']) await assertTrainedAdapters(whole, a, 4);
    await assertSameCheckpoint(killed, whole, 4, ['c', 'g']);
    assert.deepEqual(await metricRows(killed), await metricRows(whole));
    const state = JSON.parse(await readFile(ckpt(whole, 4, 'state.json'), 'utf8')) as {
      agents: { name: string; rngs: Record<string, number[]> }[];
    };
    assert.ok(
      state.agents.every((a) => a.rngs.lora_dropout),
      'the dropout RNG is checkpointed',
    );
  });

  test('at-grpo: per-role LoRA policies on different families train their adapters', async () => {
    const workflow = {
      name: 'plan-path',
      env: { height: 4, width: 4, wallProb: 0.1, maxShortest: 3 },
      maxTurns: 2,
      groupSize: 2,
      roles: { tool: { policy: 'tool', maxNewTokens: 12 }, planner: { policy: 'planner', maxNewTokens: 12 } },
    };
    const wf = JSON.stringify(workflow);
    for (const [name, flags] of [
      ['tool', ['--steps', '3', '--role', 'tool', '--batch-size', '4']],
      ['planner', ['--arch', 'gpt2']],
    ] as const) {
      const r = hacrl([
        'mas',
        'warmstart',
        '--out',
        dir(name),
        '--workflow',
        wf,
        '--hidden',
        '32',
        '--layers',
        '1',
        '--heads',
        '2',
        ...flags,
      ]);
      assert.equal(r.status, 0, r.stderr);
    }
    const runDir = join(root, 'at-grpo');
    const r = hacrl([
      'train',
      '--set',
      'algorithm=at-grpo',
      ...['tool', 'planner'].flatMap((a, i) => [
        `agents.${i}.name=${a}`,
        `agents.${i}.checkpoint=${dir(a)}`,
        `agents.${i}.lora={rank: 2, alpha: 4}`,
      ]),
      `workflow=${wf}`,
      'rollout.promptsPerStep=2',
      'optim.lr=0.01',
      // Untrained tiny policies fail alike (equal rewards, zero advantages): the entropy bonus gives a gradient anyway.
      'optim.entropyCoef=0.01',
      'eval.every=0',
      'eval.problems=3',
      'steps=2',
      `runDir=${runDir}`,
    ]);
    assert.equal(r.status, 0, r.stderr);
    for (const a of ['tool', 'planner']) await assertTrainedAdapters(runDir, a, 2);
  });
});
