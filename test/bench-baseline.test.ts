// `hacrl bench baseline`'s computation from p(q), on hand-made success probabilities whose table is known: a
// deterministic case (p ∈ {0, 1}, every draw fixed) and one with a worked binomial probability.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  BIAS_ESTIMATORS,
  type AgentBias,
  type BiasRow,
  baselineBenchOptions,
  baselineBias,
  binByOmega,
  biasMarkdown,
  correlation,
} from '../src/experiments/baseline-bias.js';
import { biasPlots, writeBiasPage } from '../src/experiments/baseline-bias-plot.js';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);
const row = (rows: BiasRow[], name: string) => rows.find((r) => r.estimator === name)!;

test('deterministic p(q): every estimator on hand-worked groups (ω = 3)', () => {
  // Learner solves q0–q2 always, q3 never; the partner only q3. P = 0.75 and 0.25, ω = 3.
  const rows = baselineBias([1, 1, 1, 0], [0, 0, 0, 1], { replicates: 3 });
  for (const r of rows) assert.equal(r.correctNegative, 0, `${r.estimator}: no own correct response below μ̂`);
  const own = row(rows, 'own');
  assert.deepEqual([own.meanBias, own.meanAbsBias, own.rmse, own.exceedsMax], [0, 0, 0, 0]);
  // Paper: q0–q2 μ̂ = 8/16 = 0.5 (bias −0.5); q3 μ̂ = 3·8/16 = 1.5 > 1 → fallback to the own mean 0 (bias 0).
  const paper = row(rows, 'paper');
  close(paper.meanBias, -0.375);
  close(paper.meanAbsBias, 0.375);
  close(paper.rmse, Math.sqrt(0.75 / 4));
  close(paper.exceedsMax, 0.25);
  // Clamped to [0.5, 2]: q3 μ̂ = 2·8/16 = 1, not above the max → used, bias +1.
  const clamped = row(rows, 'clamped');
  close(clamped.meanBias, -0.125);
  close(clamped.meanAbsBias, 0.625);
  close(clamped.exceedsMax, 0);
  // Per-question (c = 8): q0 ω = (8 + 6)/(0 + 2) = 7 → μ̂ = 0.5; q3 ω = (0 + 6)/(8 + 2) = 0.6 → μ̂ = 0.6·8/16 = 0.3.
  close(row(rows, 'per-question').meanBias, (-1.5 + 0.3) / 4);
  // Blend: the own rewards never vary, V = 0, so β = 0: the own mean.
  close(row(rows, 'blend').rmse, 0);
});

test('a worked binomial case: the share of groups above the max and of correct responses with A < 0', () => {
  // Learner p = [1, 1, 1, 0], partner p = [0.5, 0, 0, 0.5]: ω = 0.75/0.25 = 3. S ~ Bin(8, ½) partner successes.
  // q0: μ̂ = (8 + 3S)/16 > 1 ⇔ S ≥ 3, not constant ⇔ S < 8 → 218/256; all 8 own responses correct there.
  // q3: μ̂ = 3S/16 > max = 1 ⇔ S ≥ 6 → 37/256. Own correct responses: 24 per replicate (q0–q2).
  const paper = row(baselineBias([1, 1, 1, 0], [0.5, 0, 0, 0.5], { replicates: 4000, seed: 1 }), 'paper');
  close(paper.exceedsMax, (218 + 37) / 256 / 4, 0.012);
  close(paper.correctNegative, (8 * 218) / 256 / 24, 0.015);
});

test('bad input is refused; correlation; bins and the markdown table', () => {
  assert.throws(() => baselineBias([0.5], [0.5, 0.5]), /same questions/);
  assert.throws(() => baselineBias([1.5], [0.5]), /\[0, 1\]/);
  assert.throws(() => baselineBias([0.5], [0.5], { groupSize: 1 }), /group size/);
  close(correlation([0, 1, 2], [2, 4, 6]), 1);
  close(correlation([0, 1, 2], [1, 1, 1]), 0);
  const rows = baselineBias([0.2, 0.4], [0.1, 0.1], { replicates: 10 });
  const agent = (omega: number): AgentBias => ({
    pair: 'p',
    agent: 'a',
    partner: 'b',
    success: 0.3,
    omega,
    correlation: 0,
    rows,
  });
  const bins = binByOmega([agent(3), agent(0.3), agent(2.5)]);
  assert.deepEqual([...new Set(bins.map((b) => `${b.bin}:${b.agents}`))], ['0–0.5:1', '2–4:2']);
  const md = biasMarkdown([agent(3)]);
  assert.equal(md.split('\n').filter((l) => l.startsWith('| p | a |')).length, rows.length);
  const fast = baselineBenchOptions({ fast: true, seed: 0, only: 'tiny' });
  assert.deepEqual([fast.pairs, fast.questions, fast.samples, fast.bias.replicates], [['tiny'], 30, 16, 50]);
  assert.throws(() => baselineBenchOptions({ fast: false, seed: 0, only: 'huge' }), /huge/);
});

test('the plots: one panel per measure, a line per estimator through the agents in ω order', async () => {
  const rows = (scale: number): BiasRow[] =>
    BIAS_ESTIMATORS.map((estimator, e) => ({
      estimator,
      meanBias: (e - 2) * 0.01 * scale,
      meanAbsBias: 0.01 * e * scale,
      rmse: 0.1 * (1 + e) * scale,
      exceedsMax: 0,
      correctNegative: 0.01 * e,
    }));
  const agent = (name: string, omega: number, scale: number): AgentBias => ({
    pair: 'p',
    agent: name,
    partner: 'x',
    success: 0.2,
    omega,
    correlation: 0,
    rows: rows(scale),
  });
  const svgs = biasPlots([agent('strong', 3, 2), agent('weak', 0.5, 1)]);
  assert.equal(svgs.length, 4);
  // RMSE / own is 1 + e whatever the scale: each estimator's line is flat at its ratio, from ω = 0.5 to 3.
  const paths = [...svgs[0]!.matchAll(/<path class="series" d="M([\d.]+) ([\d.]+) L([\d.]+) ([\d.]+)"/g)];
  assert.equal(paths.length, BIAS_ESTIMATORS.length);
  for (const [, x0, y0, x1, y1] of paths) {
    assert.equal(y0, y1);
    assert.ok(Number(x0) < Number(x1));
  }
  const heights = paths.map((p) => Number(p[2]));
  assert.deepEqual(
    [...heights].sort((a, b) => b - a),
    heights,
    'a larger ratio is drawn higher (smaller y)',
  );
  for (const estimator of BIAS_ESTIMATORS) assert.ok(svgs[0]!.includes(`>${estimator}</text>`), estimator);
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bias-plot-'));
  await writeBiasPage([agent('strong', 3, 2)], join(dir, 'bias.html'), 'caption & note');
  const html = await readFile(join(dir, 'bias.html'), 'utf8');
  assert.equal(html.match(/<svg /g)!.length, 4);
  assert.match(html, /caption &amp; note/);
  assert.match(html, /p\/strong ω = 3\.00/);
  assert.doesNotMatch(html, /<script/);
  await rm(dir, { recursive: true, force: true });
});
