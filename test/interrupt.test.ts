// StopRequest without the addon's handler (Node's listeners alone, as when the addon is not built): the notices, the
// stop at a safe point, and the exit at the second signal; and the messages of a stop after a step and inside one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StopPoint, StopRequest } from '../src/run/interrupt.js';

test("Node's listeners alone: the first signal notes a stop for the safe points, the second exits", () => {
  const notes: string[] = [];
  const exits: number[] = [];
  const stop = new StopRequest({
    resumeHint: 'Resume with: hacrl train --resume',
    notify: (line) => notes.push(line),
    exit: (code) => exits.push(code),
  }).install({ native: false });
  try {
    stop.poll();
    process.emit('SIGTERM', 'SIGTERM');
    assert.ok(stop.requested);
    assert.throws(() => stop.poll(), StopPoint);
    assert.match(
      notes[0]!,
      /^hacrl: SIGTERM received: stopping at the next safe point; the step in progress is dropped/,
    );
    assert.deepEqual(exits, []);
    process.emit('SIGINT', 'SIGINT');
    assert.deepEqual(exits, [130]);
    assert.match(notes[1]!, /^hacrl: SIGINT received again: stopping now/);
    assert.equal(
      stop.dropped(4, 'training a', { dir: 'run/checkpoints/step-000003', step: 3 }).message,
      'stopped by SIGTERM during step 4 (training a), which was dropped; resuming continues from the newest ' +
        'checkpoint, run/checkpoints/step-000003 (step 3). Resume with: hacrl train --resume',
    );
    assert.equal(stop.dropped(1, 'sampling a', null).exitCode, 143);
    assert.match(stop.dropped(1, 'sampling a', null).message, /no checkpoint was written yet, .*start the run again$/);
    assert.equal(
      stop.interrupted(3, 'c3').message,
      'stopped by SIGTERM after step 3; checkpoint written to c3. Resume with: hacrl train --resume',
    );
  } finally {
    stop.dispose();
  }
});
