// Training-health warnings: entropy collapse and length blow-up, read from a metric history worked by hand.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { healthWarnings, type HealthThresholds, type MetricRow } from '../src/train/health-warnings.js';

const t: HealthThresholds = {
  entropyFloor: 0.01,
  entropyFraction: 0.1,
  lengthFraction: 0.9,
  truncatedFraction: 0.5,
  maxNewTokens: 100,
};
const row = (step: number, entropy: number, length = 20, truncated = 0): MetricRow => ({
  step,
  entropy,
  length_mean: length,
  truncated_frac: truncated,
});
const kinds = (history: MetricRow[], th = t): string[] => healthWarnings(history, th).map((w) => w.kind);

test('entropy collapse: below the floor, or below a fraction of the first value; quiet otherwise', () => {
  assert.deepEqual(kinds([row(1, 0.8), row(2, 0.5), row(3, 0.09)]), []); // 11% of 0.8 is above the 10% line
  const [w] = healthWarnings([row(1, 0.8), row(2, 0.5), row(3, 0.07)], t);
  assert.equal(w!.kind, 'entropy_collapse');
  assert.equal(w!.metric, 'warn/entropy_collapse');
  assert.equal(w!.first, true);
  assert.match(w!.message, /entropy 0\.0700 nats, 9% of its first value 0\.800 \(threshold 10%\)/);
  // An agent that starts nearly deterministic is judged by the floor alone.
  assert.deepEqual(kinds([row(1, 0.012), row(2, 0.011)]), []);
  assert.match(healthWarnings([row(1, 0.012), row(2, 0.009)], t)[0]!.message, /below the floor 0\.01/);
  // Rows without an entropy (a step-0 validation row) neither start the reference nor raise anything.
  assert.deepEqual(kinds([{ step: 0, val_accuracy: { a: 0.5 } }, row(1, 0.5), row(2, 0.06)]), []);
  assert.deepEqual(kinds([row(1, 0.8), row(2, 0.07)], { ...t, entropyFraction: 0 }), [], '0 turns a check off');
});

test('length blow-up: mean length near maxNewTokens, or many truncated responses', () => {
  assert.deepEqual(kinds([row(1, 1, 89.9, 0.49)]), []);
  const [w] = healthWarnings([row(1, 1, 90, 0.2)], t);
  assert.equal(w!.metric, 'warn/length_blowup');
  assert.equal(
    w!.message,
    'length blow-up: mean response length 90.0 tokens is 90% of maxNewTokens 100 (threshold 90%)',
  );
  assert.equal(
    healthWarnings([row(1, 1, 40, 0.5)], t)[0]!.message,
    'length blow-up: 50% of responses truncated (threshold 50%)',
  );
  assert.deepEqual(kinds([row(1, 1, 100, 1)], { ...t, lengthFraction: 0, truncatedFraction: 0 }), []);
});

test('a kind already recorded in an earlier row is raised again but not first, so it is printed once', () => {
  const history = [row(1, 0.8, 95, 0.9)];
  const firstTime = healthWarnings(history, t);
  assert.deepEqual(
    firstTime.map((w) => [w.kind, w.first]),
    [['length_blowup', true]],
  );
  const recorded = { ...history[0], [firstTime[0]!.metric]: 1 };
  const later = healthWarnings([recorded, row(2, 0.05, 96, 0.9)], t);
  assert.deepEqual(
    later.map((w) => [w.kind, w.first]),
    [
      ['entropy_collapse', true],
      ['length_blowup', false],
    ],
  );
  assert.deepEqual(healthWarnings([], t), []);
});
