// The training progress display: plain lines when not on a terminal (phase lines rate-limited), one status line redrawn
// in place on a terminal (checked on a small emulated screen), the ETA from measured step times, and the step watch's
// live phase lines and stop.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createProgressDisplay,
  etaSeconds,
  formatDuration,
  progressLine,
  type StepProgress,
} from '../src/train/progress.js';
import { StopPoint, StopRequest } from '../src/run/interrupt.js';
import { StepWatch } from '../src/train/step-watch.js';

const stepOf = (step: number, seconds: number): StepProgress => ({
  step,
  total: 10,
  agents: [
    { name: 'qwen', reward: 0.25 + step / 100, accuracy: 0.5 },
    { name: 'llama', reward: 0.125, accuracy: 0.375, pHat: 0.4 },
  ],
  generateTokensPerS: 812.4,
  trainTokensPerS: 2210.3,
  seconds,
  rssMiB: 95.6,
});

/**
 * The screen a terminal would show after `text`: printable characters, newlines, and the escapes log-update uses —
 * cursor up/down (CSI n A/B), to column 0 (CSI G), erase line (CSI 2K), erase to end of line (CSI K); the
 * synchronized-output brackets (CSI ?2026h/l) change nothing on screen.
 */
function screen(text: string): string[] {
  const rows: string[] = [''];
  let row = 0;
  let col = 0;
  const put = (ch: string): void => {
    const line = rows[row]!.padEnd(col);
    rows[row] = line.slice(0, col) + ch + line.slice(col + 1);
    col++;
  };
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\n') {
      row++;
      col = 0;
      rows[row] ??= '';
      continue;
    }
    if (text[i] !== '\u001b') {
      put(text[i]!);
      continue;
    }
    const m = /^\[(\??)(\d*)([A-Za-z])/.exec(text.slice(i + 1)); // after ESC: [ private-mark argument command
    assert.ok(m, `unknown escape at ${JSON.stringify(text.slice(i, i + 8))}`);
    i += m[0].length;
    const [, priv, arg, op] = m;
    const n = arg === '' ? 1 : Number(arg);
    if (priv === '?') continue;
    if (op === 'A') row = Math.max(0, row - n);
    else if (op === 'B') row += n;
    else if (op === 'G') col = 0;
    else if (op === 'K' && arg === '2') rows[row] = '';
    else if (op === 'K') rows[row] = rows[row]!.slice(0, col);
    else assert.fail(`unexpected escape ${m[0]}`);
    rows[row] ??= '';
  }
  const shown = rows.map((r) => r.trimEnd());
  // Blank rows at the bottom (where a taller frame was erased, or after the final newline) show nothing.
  while (shown.length > 0 && shown.at(-1) === '') shown.pop();
  return shown;
}

test('durations and the ETA: mean measured step time times the steps left', () => {
  assert.deepEqual([0, 42.4, 75, 187, 3725, NaN].map(formatDuration), ['0s', '42s', '1m15s', '3m07s', '1h02m', '?']);
  assert.equal(etaSeconds([2, 4], 5), 15);
  assert.ok(Number.isNaN(etaSeconds([], 5)));
  assert.equal(
    progressLine(stepOf(3, 2), 75),
    'step 3/10  qwen reward 0.280 acc 50.0%  llama reward 0.125 acc 37.5% P̂ 0.400  gen 812 tok/s  train 2210 tok/s  96 MiB  ETA 1m15s',
  );
});

test('not a terminal, or one of size 0: one plain line per step and per message, no escape codes', () => {
  const written: string[] = [];
  const d = createProgressDisplay({ write: (s) => written.push(s), isTTY: false });
  d.step(stepOf(1, 3));
  d.message('checkpoint runs/x/checkpoints/step-000001');
  d.step(stepOf(2, 5)); // mean step time 4 s, 8 steps left
  d.done();
  assert.deepEqual(written, [
    'step 1/10  qwen reward 0.260 acc 50.0%  llama reward 0.125 acc 37.5% P̂ 0.400  gen 812 tok/s  train 2210 tok/s  96 MiB  ETA 27s\n',
    'checkpoint runs/x/checkpoints/step-000001\n',
    'step 2/10  qwen reward 0.270 acc 50.0%  llama reward 0.125 acc 37.5% P̂ 0.400  gen 812 tok/s  train 2210 tok/s  96 MiB  ETA 32s\n',
  ]);
  const zeroSized: string[] = [];
  const pty = createProgressDisplay({ write: (s) => zeroSized.push(s), isTTY: true, columns: 0, rows: 0 });
  pty.step(stepOf(1, 3));
  assert.deepEqual(zeroSized, [written[0]], 'a terminal of size 0 × 0 (a CI pseudo-terminal) gets plain lines');
  const lines: string[] = [];
  const f = createProgressDisplay((line) => lines.push(line));
  f.step(stepOf(1, 1));
  f.message('hello');
  assert.deepEqual(lines.length, 2, 'a function receives the same lines');
});

test('a terminal: the status line is redrawn in place, messages stay above it, long lines wrap and are erased whole', () => {
  let out = '';
  const tty = { write: (s: string) => (out += s), isTTY: true, columns: 200 };
  const d = createProgressDisplay(tty);
  d.step(stepOf(1, 3));
  assert.deepEqual(screen(out), [progressLine(stepOf(1, 3), 27)]);
  d.step(stepOf(2, 5));
  assert.deepEqual(screen(out), [progressLine(stepOf(2, 5), 32)], 'the first line was replaced, not followed');
  d.message('warning at step 2 (qwen): length blow-up');
  d.message('checkpoint c2');
  d.phase('step 3/10  sampling qwen  0/8 sequences');
  d.phase('step 3/10  sampling qwen  4/8 sequences');
  assert.deepEqual(
    screen(out),
    [
      'warning at step 2 (qwen): length blow-up',
      'checkpoint c2',
      progressLine(stepOf(2, 5), 32),
      'step 3/10  sampling qwen  4/8 sequences',
    ],
    'the phase line lives below the status line, redrawn in place',
  );
  d.step(stepOf(3, 4));
  d.done();
  assert.deepEqual(screen(out), [
    'warning at step 2 (qwen): length blow-up',
    'checkpoint c2',
    progressLine(stepOf(3, 4), 28),
  ]);

  // 40 columns: the ~125-character line takes four rows, and the next frame replaces all four.
  out = '';
  tty.columns = 40;
  const narrow = createProgressDisplay(tty);
  narrow.step(stepOf(1, 3));
  assert.equal(screen(out).length, 4);
  narrow.step(stepOf(9, 3));
  narrow.message('done');
  const rows = screen(out);
  assert.equal(rows[0], 'done');
  const squeeze = (t: string): string => t.replace(/ /g, ''); // spaces at a wrap point end a row, so drop them all
  assert.equal(rows.length, 5);
  assert.equal(squeeze(rows.slice(1).join('')), squeeze(progressLine(stepOf(9, 3), 3)));
});

test('not a terminal: phase lines at most every plainSeconds (none before the first interval), step lines always', () => {
  let t = 0;
  const lines: string[] = [];
  const d = createProgressDisplay((line) => lines.push(line), { now: () => t, plainSeconds: 10 });
  const at = (seconds: number, f: () => void): void => {
    t = seconds * 1e3;
    f();
  };
  at(1, () => d.phase('p1'));
  at(10, () => d.phase('p10'));
  at(15, () => d.phase('p15'));
  at(16, () => d.step(stepOf(1, 16)));
  at(20, () => d.phase('p20'));
  at(26, () => d.phase('p26'));
  at(27, () => d.message('m27'));
  at(30, () => d.phase('p30'));
  assert.deepEqual(lines, ['p10', progressLine(stepOf(1, 16), 144), 'p26', 'm27']);
});

test('the step watch: a line per phase and agent with counts, tok/s and an ETA from the first phase; stops throw', () => {
  let t = 0;
  const lines: string[] = [];
  const d = createProgressDisplay((line) => lines.push(line), { now: () => t, plainSeconds: 0 });
  const stop = new StopRequest();
  const w = new StepWatch(d, 3, stop, () => t);
  const at = (ms: number, f: () => void): string => {
    t = ms;
    f();
    return lines.at(-1)!;
  };
  w.startStep(0);
  assert.equal(
    at(0, () => w.phase('sampling', 'a', 4)),
    'step 1/3  sampling a  0/4 sequences  0 tokens  ETA ≥ 0s',
  );
  // Before a step has ended the ETA is a lower bound: this step's phases so far, the running one projected.
  assert.equal(
    at(1000, () => w.generated(4)),
    'step 1/3  sampling a  0/4 sequences  4 tokens  4 tok/s  ETA ≥ 2s',
  );
  assert.equal(
    at(1050, () => w.generated(4)),
    'step 1/3  sampling a  0/4 sequences  4 tokens  4 tok/s  ETA ≥ 2s',
  );
  assert.equal(
    at(2000, () => w.finished(4)),
    'step 1/3  sampling a  4/4 sequences  8 tokens  4 tok/s  ETA ≥ 4s',
  );
  assert.equal(
    at(2000, () => w.phase('training', 'a')),
    'step 1/3  training a  ETA ≥ 4s',
  );
  assert.equal(
    at(4000, () => w.updated(1, 2, 300)),
    'step 1/3  training a  mini-batch 1/2  150 tok/s  ETA ≥ 14s',
  );
  assert.equal(w.trainTokens, 300);
  w.endStep(6);
  t = 6000;
  w.startStep(1);
  assert.equal(w.trainTokens, 0);
  assert.equal(
    at(6000, () => w.phase('sampling', 'a', 4)),
    'step 2/3  sampling a  0/4 sequences  0 tokens  ETA 12s',
  );
  stop.signal = 'SIGTERM';
  assert.throws(() => w.generated(1), StopPoint);
  assert.equal(w.current, 'sampling a');
});
