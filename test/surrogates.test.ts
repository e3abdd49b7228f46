// The registries of the learner: surrogates and advantage estimators by name, the config enums they give, and CISPO
// — the objective added as one surrogate and one recipe row — checked for its gradient and selected by its preset.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADVANTAGE_ESTIMATORS, ADVANTAGE_ESTIMATOR_NAMES } from '../src/algorithms/advantages.js';
import { DAPO_CLIP } from '../src/algorithms/clipped-surrogate.js';
import { discrepancyCoefficients } from '../src/algorithms/hacpo/capability.js';
import { policyLoss } from '../src/algorithms/policy-loss.js';
import { VARIANT_RECIPES } from '../src/algorithms/recipes.js';
import { FOREIGN_SURROGATES, OWN_SURROGATES, SURROGATES } from '../src/algorithms/surrogates.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { configJsonSchema } from '../src/config/rl-config.js';
import { resolveRun } from '../src/train/resolved-run.js';
import { near } from './helpers.js';

/** The enum of a config field in the JSON Schema, e.g. ['optim', 'surrogate']. */
function schemaEnum(path: string[]): unknown {
  let node = configJsonSchema() as Record<string, unknown>;
  for (const key of path) node = (node.properties as Record<string, Record<string, unknown>>)[key]!;
  return node.enum;
}

test('the config enums are the registries: surrogates by the responses they serve, advantage estimators', () => {
  assert.deepEqual(schemaEnum(['optim', 'surrogate']), OWN_SURROGATES);
  assert.deepEqual(schemaEnum(['hacpo', 'foreignSurrogate']), FOREIGN_SURROGATES);
  assert.deepEqual(schemaEnum(['optim', 'advantage']), ADVANTAGE_ESTIMATOR_NAMES);
  assert.deepEqual(
    [...OWN_SURROGATES, ...FOREIGN_SURROGATES].sort(),
    [...Object.keys(SURROGATES), 'seq-clip'].sort(),
    'seq-clip serves both',
  );
  assert.throws(
    () => policyLoss([], { objective: { surrogate: 'hacpo-foreign' } }),
    /no own-response surrogate "hacpo-foreign": choose one of token-clip, seq-clip, cispo/,
  );
});

test('CISPO keeps the gradient of every token, −w·clip(ρ)·A, where the PPO clip zeroes it', () => {
  // Two tokens of one sequence, A = 1: ρ = e^0.5 ≈ 1.65 is past 1 + ε_high = 1.28, ρ = e^−0.1 ≈ 0.905 inside.
  const seq = { logProbs: [-0.5, -1.1], oldLogProbs: [-1, -1], advantage: 1 };
  const w = 0.5; // token-mean over 2 tokens
  const cispo = policyLoss([seq], { objective: { surrogate: 'cispo' } });
  const ppo = policyLoss([seq], { objective: { surrogate: 'token-clip' } });
  near(Array.from(cispo.grad[0]!), [-w * (1 + DAPO_CLIP.high), -w * Math.exp(-0.1)], 1e-7);
  near(Array.from(ppo.grad[0]!), [0, -w * Math.exp(-0.1)], 1e-7);
  near(cispo.loss, -w * ((1 + DAPO_CLIP.high) * -0.5 + Math.exp(-0.1) * -1.1), 1e-12);
  near([cispo.stats.clipFracHigh, cispo.stats.ratioMax], [0.5, Math.exp(0.5)], 1e-12);
  // A negative advantage pushes the other way, with the weight clipped below at 1 − ε_low.
  const down = policyLoss([{ ...seq, logProbs: [-2, -1], advantage: -1 }], { objective: { surrogate: 'cispo' } });
  near(Array.from(down.grad[0]!), [w * (1 - DAPO_CLIP.low), w * 1], 1e-7);
});

test('CISPO is one recipe row: `preset: cispo` trains with it under GRPO settings', () => {
  assert.equal(VARIANT_RECIPES.cispo.surrogate, 'cispo');
  const cfg = parseRunConfig({ preset: 'cispo', agents: [{ name: 'a', checkpoint: 'x' }] });
  const r = resolveRun(cfg).recipe;
  assert.deepEqual([r.surrogate, r.advantage, r.aggregation, r.clip], ['cispo', 'group-std', 'token-mean', DAPO_CLIP]);
  const grpo = resolveRun(parseRunConfig({ agents: [{ name: 'a', checkpoint: 'x' }] })).recipe;
  assert.equal(grpo.surrogate, 'token-clip');
});

test('the capability-aware estimator carries Eq. 10 beside Eqs. 6–9; group-relative ones carry none', () => {
  const input = {
    rewards: [1, 0, 1, 1],
    groups: [0, 0, 0, 0],
    generators: [0, 0, 1, 1],
    learner: 0,
    capability: [0.5, 0.75],
    capabilityBaseline: true,
    discrepancyCoefficient: true,
  };
  const on = ADVANTAGE_ESTIMATORS['capability-aware'].estimate(input);
  assert.deepEqual(Array.from(on.coefficients!), Array.from(discrepancyCoefficients([0.5, 0.75], 0)));
  assert.deepEqual(Array.from(on.omega!), [1, 0.5 / 0.75]);
  const off = ADVANTAGE_ESTIMATORS['capability-aware'].estimate({ ...input, discrepancyCoefficient: false });
  assert.equal(off.coefficients, null);
  const plain = ADVANTAGE_ESTIMATORS['group-std'].estimate(input);
  assert.deepEqual([plain.coefficients, plain.omega], [null, null]);
  // Same rewards, different baselines: ω^(0,1) = 2/3 lowers the foreign rewards' weight in μ̂, so A differs.
  assert.notDeepEqual(Array.from(on.advantages), Array.from(plain.advantages));
});
