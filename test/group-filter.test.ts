// The AT-GRPO group filter: the reference's lowest-mean fraction (default on, ratio 0.5); zero-variance groups are
// the learner's to leave out (optim.filterZeroVariance, learner-step.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEFAULT_GROUP_FILTER, filterGroups } from '../src/workflows/group-filter.js';

const groups = [
  { key: 'a', rewards: [0, 0.2] }, // mean 0.1
  { key: 'b', rewards: [1, 1] }, // mean 1, zero variance
  { key: 'c', rewards: [0.3, 0.3] }, // mean 0.3, zero variance
  { key: 'd', rewards: [0, 1.8] }, // mean 0.9
];

describe('group filter', () => {
  test("default: the reference's filter drops the lowest-mean half, zero-variance groups stay", () => {
    assert.deepEqual(DEFAULT_GROUP_FILTER, { lowMeanRatio: 0.5 });
    assert.deepEqual(filterGroups(groups), { kept: ['b', 'd'], droppedLowMean: ['a', 'c'] });
    assert.deepEqual(filterGroups(groups, { lowMeanRatio: 0 }), { kept: ['a', 'b', 'c', 'd'], droppedLowMean: [] });
  });

  test('floor(ratio · n) groups go; equal means drop the earlier group first; bad ratio refused', () => {
    const tied = [
      { key: 'x', rewards: [1, 0] },
      { key: 'y', rewards: [0.5, 0.5] },
      { key: 'z', rewards: [2, 0] },
    ];
    assert.deepEqual(filterGroups(tied, { lowMeanRatio: 0.5 }).droppedLowMean, ['x']);
    assert.deepEqual(filterGroups(tied, { lowMeanRatio: 0.7 }).droppedLowMean, ['x', 'y']);
    assert.throws(() => filterGroups(tied, { lowMeanRatio: 1 }), /lowMeanRatio must be in \[0, 1\)/);
  });
});
