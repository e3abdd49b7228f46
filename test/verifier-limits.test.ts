// Hostile answers for the math checker: each gets a verdict or a clear reason within its time limit, never a hang,
// a crash or a wrong "equal". Ends with a seeded fuzz loop bounded in iterations.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { MAX_ANSWER_CHARS, MAX_NESTING } from '../src/rewards/limits.js';
import { verify, verifyFast, verifyMany } from '../src/rewards/math-equal.js';
import { normalizeAnswer } from '../src/rewards/normalize.js';
import { mathReward, scoreSamples } from '../src/rewards/reward.js';
import { closeDefaultPool, SymbolicPool } from '../src/rewards/worker-pool.js';
import { Rng } from '../src/util/rng.js';

after(() => closeDefaultPool());

/** Milliseconds `fn` took, with its result. */
function timed<T>(fn: () => T): { ms: number; value: T } {
  const start = performance.now();
  const value = fn();
  return { ms: performance.now() - start, value };
}

describe('the fast path stays fast on hostile text', () => {
  test('unit stripping is linear: long sentences of words after a number', () => {
    // 24 words took 4.4 s with the old unit regex, doubling with every word; 150 words fit under the length cap.
    for (const n of [24, 60, 150]) {
      const answer = `5 ${Array.from({ length: n }, (_, i) => `w${String.fromCharCode(97 + (i % 26))}x`).join(' ')}`;
      assert.ok(answer.length <= MAX_ANSWER_CHARS);
      const { ms, value } = timed(() => verifyFast('5', answer));
      assert.ok(ms < 100, `${n} words took ${ms.toFixed(1)} ms`);
      assert.deepEqual(value, { equal: true, reason: 'exact' }, `${n} words after a number are a unit or a noun`);
    }
    assert.equal(normalizeAnswer('12\\pi \\text{ square units}'), '12\\pi');
    assert.equal(normalizeAnswer('10 km/h'), '10');
    assert.equal(normalizeAnswer('5 m^2'), '5');
    assert.equal(normalizeAnswer('5x'), '5x');
  });

  test('answers too long or too deep get a reason, not a crash or a minutes-long run', async () => {
    const cases: [string, string][] = [
      ['('.repeat(10_000) + '1' + ')'.repeat(10_000), 'too-long'],
      ['\\left('.repeat(10_000) + 'x' + '\\right)'.repeat(10_000), 'too-long'],
      ['\\{'.repeat(10_000) + '1' + '\\}'.repeat(10_000), 'too-long'],
      ['{'.repeat(100_000) + '1' + '}'.repeat(100_000), 'too-long'],
      ['7'.repeat(500_000) + '/' + '3'.repeat(500_000), 'too-long'],
      ['('.repeat(MAX_NESTING + 1) + '1' + ')'.repeat(MAX_NESTING + 1), 'too-deep'],
      ['\\left('.repeat(MAX_NESTING + 1) + 'x' + '\\right)'.repeat(MAX_NESTING + 1), 'too-deep'],
    ];
    for (const [answer, reason] of cases) {
      for (const [gold, ans] of [
        ['1', answer],
        [answer, '1'],
      ]) {
        const { ms, value } = timed(() => verifyFast(gold!, ans!));
        assert.equal(value.equal, null);
        assert.equal(value.reason, reason);
        assert.match(value.detail!, /limit/);
        assert.ok(ms < 100, `${reason} took ${ms.toFixed(1)} ms`);
      }
    }
    const { stats } = await verifyMany([
      { gold: '1', answer: cases[0]![0] },
      { gold: '1', answer: cases[5]![0] },
      { gold: '1', answer: '1' },
    ]);
    assert.equal(stats.tooLong, 1);
    assert.equal(stats.tooDeep, 1);
    assert.equal(stats.equal, 1);
    // Nesting up to the limit is still read.
    const deep = '('.repeat(MAX_NESTING) + '1' + ')'.repeat(MAX_NESTING);
    assert.deepEqual(verifyFast('1', deep), { equal: true, reason: 'exact' });
  });
});

describe('a policy that writes adversarial answers', () => {
  test('is scored at fast-path speed: no check waits on a hang', async () => {
    const words = Array.from({ length: 120 }, (_, i) => `w${String.fromCharCode(97 + (i % 26))}q`).join(' ');
    const hostile = [
      `So \\boxed{5 ${words}}`,
      `\\boxed{${'('.repeat(200)}1${')'.repeat(200)}}`,
      `\\boxed{${'{'.repeat(5000)}1${'}'.repeat(5000)}}`,
      `\\boxed{${'9'.repeat(3000)}/${'7'.repeat(3000)}}`,
      `\\boxed{\uFFFD}`,
    ];
    const samples = Array.from({ length: 64 }, (_, i) => ({ prompt: 'p', response: hostile[i % 5]!, gold: '5' }));
    const start = performance.now();
    const { scores, stats } = await scoreSamples(samples, [{ name: 'math', fn: mathReward(), weight: 1 }]);
    const ms = performance.now() - start;
    assert.ok(ms < 2000, `64 adversarial responses took ${ms.toFixed(0)} ms`);
    // The sentence after 5 is read as a unit or noun; the rest are refused (counted as failures, scored 0).
    assert.equal(scores.filter((s) => s.total === 1).length, 13);
    assert.equal(stats[0]!.failures, 39);
    assert.match(stats[0]!.firstError!, /verifier: too-(deep|long)/);
  });
});

describe('the checker does not say "equal" for different values', () => {
  test('integers written as expressions are compared exactly', async () => {
    const pool = new SymbolicPool({ size: 1 });
    try {
      const cases: [string, string, boolean][] = [
        ['1450000', '1450000+1', false],
        ['1073741825', '2^{30}', false],
        ['1073741824', '2^{30}', true],
        ['10^{100}+1', '10^{100}', false],
        ['10^{100}', '100^{50}', true],
        ['\\frac{2^{70}}{3}', '\\frac{2^{70}+1}{3}', false],
        ['3', '\\sqrt{9}', true],
      ];
      for (const [gold, answer, want] of cases)
        assert.equal((await verify(gold, answer, { pool })).equal, want, `${gold} vs ${answer}`);
      // An integer too large for a double against a value the engine cannot write exactly: no verdict, not a guess.
      assert.notEqual((await verify('2^{10^{10}}', '2^{10^{10}}+1', { pool })).equal, true);
    } finally {
      await pool.close();
    }
  });

  test('undefined values are never equal, not even to the same text', async () => {
    assert.equal((await verify('x/0', 'y/0')).equal, null);
    assert.equal((await verify('1/0', '1/0')).reason, 'unparseable-gold');
    assert.equal((await verify('5', '\\frac{1}{0}')).equal, false);
    assert.equal((await verify('5', 'x/0')).equal, false);
    assert.equal((await verify('0', '0/0')).equal, false);
    assert.equal((await verify('\\infty', '\\infty')).equal, true, 'infinity is a value, not undefined');
  });

  test('text that was not valid UTF-8 (U+FFFD) is refused, so different bytes cannot look alike', () => {
    const r = verifyFast('\uFFFD', '\uFFFD');
    assert.equal(r.reason, 'unparseable-gold');
    assert.equal(verifyFast('1', '1\uFFFD').equal, false);
  });
});

describe('one time limit for the whole check', () => {
  test('the fast path and the worker share the limit; a bad limit is refused', async () => {
    const start = performance.now();
    const r = await verify('\\sum_{k=1}^{10^9} k', '5', { timeoutMs: 300 });
    const ms = performance.now() - start;
    assert.equal(r.reason, 'timeout');
    assert.equal(r.detail, 'no verdict within 300 ms');
    // The first check also starts the worker (loading the engine is not counted), so the margin is generous.
    assert.ok(ms < 300 + 5000, `took ${ms.toFixed(0)} ms`);
    assert.throws(() => verifyFast('1', '1', { timeoutMs: 2 ** 31 }), /from 1 to 2147483647/);
    assert.throws(() => new SymbolicPool({ timeoutMs: 0 }), /whole number of milliseconds/);
  });
});

/** A seeded source of uniform numbers in [0, 1), so the fuzz inputs are the same on every run. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

const PIECES = [
  '(',
  ')',
  '[',
  ']',
  '{',
  '}',
  '\\{',
  '\\}',
  '\\left(',
  '\\right)',
  '\\frac',
  '\\sqrt',
  '\\boxed{',
  '^',
  '_',
  ',',
  ' ',
  '.',
  '/',
  '-',
  '+',
  '=',
  '%',
  '$',
  '\\pi',
  '\\infty',
  '\\cup',
  '\\pm',
  '\\text{',
  'km',
  'units',
  'x',
  'e',
  '0',
  '1',
  '7',
  '9',
  '\\,',
  '{,}',
  '\\!',
  '\\begin{pmatrix}',
  '\\end{pmatrix}',
  '\\\\',
  '&',
  'per',
  'sq',
  '\u00d7',
  '\uFFFD',
];

/** A random answer: LaTeX-ish pieces, random code units, or deep nesting, up to a little past the length cap. */
function randomAnswer(next: () => number): string {
  const kind = next();
  const len = Math.floor(next() * next() * (MAX_ANSWER_CHARS * 1.2));
  if (kind < 0.15) return Array.from({ length: len }, () => String.fromCharCode(Math.floor(next() * 0xffff))).join('');
  if (kind < 0.3) {
    const d = Math.floor(next() * MAX_NESTING * 1.5);
    const [o, c] = [
      ['(', ')'],
      ['{', '}'],
      ['\\left(', '\\right)'],
      ['\\frac{', '}{2}'],
    ][Math.floor(next() * 4)]!;
    return o.repeat(d) + '1' + c.repeat(d);
  }
  let s = '';
  while (s.length < len) s += PIECES[Math.floor(next() * PIECES.length)]!;
  return s;
}

describe('fuzz (seeded, bounded)', () => {
  test('the fast path answers every random answer quickly and never throws', () => {
    const next = rng(11);
    const tally = { tried: 0, verdict: 0, reason: 0, slowest: 0 };
    for (let i = 0; i < 400; i++) {
      const answer = randomAnswer(next);
      const gold = next() < 0.5 ? '1' : randomAnswer(next);
      const { ms, value } = timed(() => verifyFast(gold, answer));
      tally.tried++;
      if (value.equal === null) tally.reason++;
      else tally.verdict++;
      tally.slowest = Math.max(tally.slowest, ms);
      assert.ok(ms < 250, `fuzz input ${i} took ${ms.toFixed(0)} ms: ${JSON.stringify(answer.slice(0, 80))}`);
    }
    console.log(`verifier fast-path fuzz: ${JSON.stringify(tally)}`);
  });

  test('whole checks, symbolic engine included, end within the limit plus a margin', async () => {
    const next = rng(12);
    const pool = new SymbolicPool({ size: 1, timeoutMs: 400 });
    try {
      await pool.check({ gold: '1', answer: '1', relTol: 1e-6, percentLenient: true }); // start the worker
      const tally: Record<string, number> = {};
      for (let i = 0; i < 12; i++) {
        const answer = randomAnswer(next);
        const start = performance.now();
        const r = await verify('x+1', answer, { pool });
        const ms = performance.now() - start;
        assert.notEqual(r.reason, 'error', `fuzz input ${i}: ${r.detail}`);
        // A time-out replaces the worker; the next check waits for the new one's engine to load (not counted).
        assert.ok(ms < 400 + 3000, `fuzz input ${i} took ${ms.toFixed(0)} ms`);
        tally[r.reason] = (tally[r.reason] ?? 0) + 1;
      }
      console.log(`verifier whole-check fuzz: ${JSON.stringify(tally)}`);
    } finally {
      await pool.close();
    }
  });
});
