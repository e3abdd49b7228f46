// Collaborative training end to end on very small agents: the three kinds of heterogeneity (state, size, model with
// another tokenizer), three agents at once, naive sharing as HACPO with every mechanism off, and a SIGKILL'd
// collaborative run resumed bit for bit.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertSameCheckpoint, hacrl, hacrlKilledAt, metricRows as metrics, TINY_AGENT_FLAGS } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-hacpo-'));
after(() => rm(root, { recursive: true, force: true }));
const rewardPath = join(root, 'digits.mjs');

/** The starting agents: `base` and three others, each different from it in one way. */
const AGENTS: Record<string, string[]> = {
  base: [...TINY_AGENT_FLAGS, '--steps', '10'],
  // state: same architecture and tokenizer, more warm-up training.
  state: [...TINY_AGENT_FLAGS, '--steps', '30'],
  // size: same family and tokenizer, wider and deeper.
  size: ['--hidden', '48', '--layers', '2', '--heads', '2', '--batch-size', '8', '--steps', '10'],
  // model: another architecture and a trained byte-level BPE instead of characters.
  model: ['--arch', 'gpt2', '--tokenizer', 'bpe', '--bpe-vocab', '300', ...TINY_AGENT_FLAGS, '--steps', '10'],
};
const dir = (name: string): string => join(root, 'agents', name);

type Row = Record<string, unknown>;

/** Overrides of a small collaborative run of `agents` in `runDir`. */
function runArgs(runDir: string, agents: string[], extra: string[] = []): string[] {
  return [
    'train',
    '--set',
    ...agents.flatMap((a, i) => [`agents.${i}.name=${a}`, `agents.${i}.checkpoint=${dir(a)}`]),
    'preset=hacpo',
    `runDir=${runDir}`,
    'data.train=easy:train:64',
    'data.validation=[easy:test:4]',
    'data.template={question}',
    'rollout.promptsPerStep=2',
    'rollout.groupSize=4',
    'rollout.maxNewTokens=12',
    'optim.lr=0.003',
    'reward.math=0',
    `reward.custom=[{path: ${rewardPath}, weight: 1, name: digits}]`,
    'steps=2',
    'eval.every=0',
    'eval.problems=4',
    ...extra,
  ];
}

const weights = (path: string): Promise<Buffer> => readFile(join(path, 'model.safetensors'));
const finalWeights = (runDir: string, agent: string, step: number): Promise<Buffer> =>
  weights(join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`, 'agents', agent));

/**
 * Runs `agents` together for 2 steps and checks what every collaborative run must show. `spellNothing`: character
 * learners whose only partner is the byte-level BPE agent; a tiny BPE agent emits stray bytes (U+FFFD) and characters
 * outside the char alphabet, so such a learner may have to drop every foreign sample, and must count each one.
 */
async function twoSteps(
  name: string,
  agents: string[],
  extra: string[] = [],
  miniBatches = 4,
  groupSizes: Record<string, number> = {},
  spellNothing: string[] = [],
): Promise<Row[]> {
  const runDir = join(root, name);
  const r = hacrl(runArgs(runDir, agents, extra));
  assert.equal(r.status, 0, r.stderr);
  // One status line per step, every agent's reward, accuracy and capability estimate on it.
  const perAgent = agents.map((a) => `${a} reward \\d\\.\\d{3} acc \\d+\\.\\d% P̂ \\d\\.\\d{3}`).join(' {2}');
  assert.match(
    r.stdout,
    new RegExp(`^step 2/2 {2}${perAgent} {2}gen \\d+ tok/s {2}train \\d+ tok/s {2}\\d+ MiB {2}ETA 0s$`, 'm'),
  );
  const all = await metrics(runDir);
  const base = all.filter((row) => row.step === 0);
  assert.deepEqual(
    base.map((row) => row.agent),
    agents,
    'each base model validated at step 0',
  );
  assert.ok(base.every((row) => typeof row['val/easy:test/greedy'] === 'number'));
  const rows = all.filter((row) => row.step !== 0);
  assert.equal(rows.length, 2 * agents.length, 'one row per step and agent');
  for (const row of rows) {
    const others = agents.filter((a) => a !== row.agent);
    // Every learner trained on its own B·G samples and on the (n − 1)·B·G foreign ones, less any whose text its
    // tokenizer cannot encode (a character-level learner reading a byte-level BPE agent's stray bytes).
    const foreign = (row.foreign_samples as number) + (row.foreign_dropped as number);
    const expected = others.reduce((n, o) => n + 2 * (groupSizes[o] ?? 4), 0);
    assert.equal(foreign, expected, `${name}: foreign samples of ${String(row.agent)}`);
    if (spellNothing.includes(row.agent as string))
      assert.ok((row.foreign_dropped as number) > 0, `${name}: ${String(row.agent)} counted the text it cannot spell`);
    else assert.ok((row.foreign_samples as number) > 0, `${name}: ${String(row.agent)} learned from others`);
    assert.ok(typeof row.p_hat === 'number' && row.p_hat >= 1e-8 && row.p_hat <= 1, `${name}: P̂ ${String(row.p_hat)}`);
    for (const o of others) {
      const w = row[`omega_${o}`];
      assert.ok(typeof w === 'number' && w >= 0.1 && w <= 10, `${name}: ω to ${o} is ${String(w)}`);
    }
    assert.ok(Number.isFinite(row.loss), `${name}: loss ${String(row.loss)}`);
    // No foreign sample in the loss: no foreign ratio to report (null, never a made-up number).
    const ratioOk =
      row.foreign_samples === 0 ? row.foreign_ratio_mean === null : Number.isFinite(row.foreign_ratio_mean);
    assert.ok(ratioOk, `${name}: foreign ratio ${String(row.foreign_ratio_mean)}`);
    for (let m = 0; m < miniBatches; m++) {
      const f = row[`foreign_in_band_frac_m${m}`];
      assert.ok(f === null || (typeof f === 'number' && f >= 0 && f <= 1), `${name}: in-band fraction m${m}: ${f}`);
    }
  }
  for (const a of agents)
    assert.ok(!(await weights(dir(a))).equals(await finalWeights(runDir, a, 2)), `${name}: ${a}'s weights changed`);
  return rows;
}

describe('hacrl train: collaborative runs', () => {
  before(async () => {
    await writeFile(
      rewardPath,
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    for (const [name, flags] of Object.entries(AGENTS)) {
      const r = hacrl(['sft', '--out', dir(name), '--eval-every', '0', '--eval-n', '4', '--train-n', '200', ...flags]);
      assert.equal(r.status, 0, r.stderr);
    }
  });

  test('state heterogeneity: same architecture and tokenizer, different checkpoints', async () => {
    // With its own group size: 2 prompts × 4 of its own and × 2 of the other's (3 mini-batches of 4).
    await twoSteps('state', ['base', 'state'], ['agents.1.groupSize=2', 'optim.miniBatches=3'], 3, { state: 2 });
  });

  test('size heterogeneity: same family and tokenizer, different width and depth', async () => {
    await twoSteps('size', ['base', 'size']);
  });

  test('model heterogeneity: another architecture and tokenizer (responses re-tokenized)', async () => {
    await twoSteps('model', ['base', 'model'], [], 4, {}, ['base']);
  });

  test('model heterogeneity with the ratio per character of the response (hacpo.ratioNormalization=char)', async () => {
    const rows = await twoSteps('model-char', ['base', 'model'], ['hacpo.ratioNormalization=char'], 4, {}, ['base']);
    const perToken = (await metrics(join(root, 'model'))).filter((row) => row.step === 1 && row.agent === 'model');
    const perChar = rows.filter((row) => row.step === 1 && row.agent === 'model');
    // Step 1 samples the same responses either way; only the BPE learner's ratios on the char agent's text differ.
    assert.equal(perChar[0]!.reward_mean, perToken[0]!.reward_mean);
    assert.ok(typeof perChar[0]!.foreign_in_band_frac === 'number', 'the in-band fraction is logged');
    assert.notEqual(perChar[0]!.foreign_ratio_mean, perToken[0]!.foreign_ratio_mean);
    // Both forms' in-band fractions are logged; the one that trains is the loss's own count.
    for (const row of rows) assert.equal(row.foreign_in_band_frac, row.foreign_in_band_frac_char);
    // With one partner, its own share in the form that trains is the same count.
    for (const row of rows)
      if (typeof row.foreign_in_band_frac === 'number')
        assert.equal(row[`partner_${row.agent === 'base' ? 'model' : 'base'}_in_band_frac`], row.foreign_in_band_frac);
    for (const row of await metrics(join(root, 'model')))
      if (row.step !== 0) assert.equal(row.foreign_in_band_frac, row.foreign_in_band_frac_token);
  });

  test('rollout correction under HACPO: own responses per sequence; a mask that drops nothing trains like none', async () => {
    const extra = ['optim.rolloutCorrection=mask', 'optim.rolloutCorrectionLevel=sequence'];
    const rows = await twoSteps('rollout-mask', ['base', 'size'], extra);
    for (const row of rows) {
      const [kl, max, dropped] = [row.rollout_kl, row.rollout_ratio_max, row.rollout_corrected_frac] as number[];
      assert.ok(kl! >= 0 && kl! < 1e-4 && max! < 1.01 && dropped === 0, JSON.stringify(row));
    }
    const without = (rs: Row[]) =>
      rs.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !/^rollout_/.test(k))));
    assert.deepEqual(
      without(rows),
      (await metrics(join(root, 'size'))).filter((row) => row.step !== 0),
    );
    for (const a of ['base', 'size'])
      assert.ok(
        (await finalWeights(join(root, 'rollout-mask'), a, 2)).equals(await finalWeights(join(root, 'size'), a, 2)),
      );
  });

  test("old log-probs from the sampler under HACPO: the same samples, ratios within rounding of the learner's", async () => {
    const rows = await twoSteps('sampler-old', ['base', 'size'], ['optim.oldLogProbs=sampler']);
    const learner = (await metrics(join(root, 'size'))).filter((row) => row.step !== 0);
    for (const [i, row] of rows.entries()) {
      const other = learner[i]!;
      assert.equal(row.agent, other.agent);
      if (row.step === 1) assert.equal(row.reward_mean, other.reward_mean, 'sampling precedes the old log-probs');
      // The sampler's log-probs differ from the learner's by rounding only, so the ratios stay where they were.
      // Own ratios start from them, foreign ones (Eqs. 11–12) divide by the generator's.
      for (const key of ['ratio_mean', 'foreign_ratio_mean'])
        assert.ok(Math.abs((row[key] as number) - (other[key] as number)) < 1e-3, `${key}: ${JSON.stringify(row)}`);
    }
  });

  test('three agents of three kinds learn from each other', async () => {
    await twoSteps('three', ['base', 'size', 'model'], ['optim.miniBatches=3'], 3);
  });

  test('naive sharing is HACPO with every mechanism off', async () => {
    const naive = await twoSteps('naive', ['base', 'model'], ['preset=naive', 'algorithm=naive'], 4, {}, ['base']);
    const off = await twoSteps(
      'off',
      ['base', 'model'],
      [
        'hacpo.capabilityBaseline=false',
        'hacpo.discrepancyCoefficient=false',
        'hacpo.foreignSurrogate=seq-clip',
        'hacpo.alpha=0',
      ],
      4,
      {},
      ['base'],
    );
    assert.deepEqual(off, naive);
    for (const a of ['base', 'model'])
      assert.ok((await finalWeights(join(root, 'off'), a, 2)).equals(await finalWeights(join(root, 'naive'), a, 2)));
    const hacpo = await metrics(join(root, 'model'));
    assert.notDeepEqual(hacpo, naive, 'the mechanisms change the training');
  });

  test("the paper's no-Clip ablation is one config change: every foreign sample stays in the loss", async () => {
    const rows = await twoSteps('noclip', ['base', 'state'], ['hacpo.foreignSurrogate=hacpo-foreign-unclipped']);
    // null: a mini-batch of 4 that happened to draw no foreign sample.
    const fractions = rows.flatMap((row) => [0, 1, 2, 3].map((m) => row[`foreign_in_band_frac_m${m}`]));
    assert.ok(fractions.every((f) => f === 1 || f === null) && fractions.includes(1), JSON.stringify(fractions));
  });

  test('a collaborative run killed with SIGKILL and resumed ends like an uninterrupted one', async () => {
    const args = (d: string): string[] =>
      runArgs(d, ['base', 'model'], ['steps=5', 'checkpoint.every=1', 'checkpoint.keepLast=10']);
    const whole = join(root, 'whole');
    assert.equal(hacrl(args(whole)).status, 0);
    const killed = join(root, 'killed');
    await hacrlKilledAt(args(killed), join(killed, 'checkpoints', 'step-000002', 'state.json'));
    assert.ok(!existsSync(join(killed, 'checkpoints', 'step-000005')), 'killed before the end');
    const resumed = hacrl([...args(killed), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /resuming .* from step [2-4]/);
    for (const a of ['base', 'model'])
      assert.ok((await finalWeights(killed, a, 5)).equals(await finalWeights(whole, a, 5)), `${a}: final weights`);
    await assertSameCheckpoint(killed, whole, 5, ['base', 'model']);
    assert.deepEqual(await metrics(killed), await metrics(whole));
  });
});
