// The package entry point hands researchers the HACPO pieces as plain functions they can call from their own trainer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as hacrl from '../src/index.js';

test('the HACPO equations are exported from the package entry point and work on plain numbers', () => {
  const tracker = new hacrl.CapabilityTracker(5);
  tracker.record(0.5);
  // Learner 0 (P̂ 0.5) with agent 1 (P̂ 0.75): ω^(0,1) = 2/3 in the baseline, 1.5 on agent 1's advantages.
  const estimates = [tracker.estimate(), 0.75];
  const omega = hacrl.baselineRatios(estimates, 0);
  assert.deepEqual(Array.from(hacrl.discrepancyCoefficients(estimates, 0)), [1, 1.5]);
  const { advantages, baseline } = hacrl.capabilityAwareAdvantages(
    [1, 0, 0, 1, 1, 1, 1, 0],
    [0, 0, 0, 0, 1, 1, 1, 1],
    0,
    omega,
  );
  assert.ok(Math.abs(baseline - 0.5) < 1e-12);
  assert.ok(Math.abs(advantages[0]! - 0.5 / (Math.sqrt(1.875 / 7) + 1e-6)) < 1e-9);
  const loss = hacrl.foreignSequenceLoss(Math.log(0.9), 0.5, 1.5, 1, hacrl.DEFAULT_STEPWISE_CLIP, 1);
  assert.ok(Math.abs(loss.loss + 0.6075) < 1e-12);
  for (const name of [
    'teamStep',
    'exponentialIs',
    'crossSequenceLogRatio',
    'stepwiseLowerBound',
    'retokenizeResponse',
    'policyLoss',
    'learnerStep',
    'trainRl',
    'createProgressDisplay',
    'healthWarnings',
  ] as const)
    assert.equal(typeof hacrl[name], 'function', name);
});
