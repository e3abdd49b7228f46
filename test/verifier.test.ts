// The math answer checker: a table of equal and not-equal pairs, extraction, time-outs, and every GSM8K test gold.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { extractAnswer, extractBoxed, extractGold } from '../src/rewards/extract.js';
import { verify, verifyFast, verifyMany } from '../src/rewards/math-equal.js';
import { normalizeAnswer } from '../src/rewards/normalize.js';
import { parseNumber } from '../src/rewards/number.js';
import { closeDefaultPool, SymbolicPool } from '../src/rewards/worker-pool.js';
import { gsm8kFile, gsm8kSkip } from './gsm8k-data.js';

after(() => closeDefaultPool());

/** [gold, answer, equal?] — grouped by what each block exercises. */
const PAIRS: [string, string, boolean][] = [
  // plain numbers, GSM8K golds, thousands separators, decimals, signs
  ['18', '18', true],
  ['#### 18', '18', true],
  ['#### 18', '\\boxed{18}', true],
  ['7,425,000', '7425000', true],
  ['7425000', '7,425,000', true],
  ['14{,}916', '14916', true],
  ['14916', '14{,}916', true],
  ['7\\,425\\,000', '7425000', true],
  ['7 425 000', '7425000', true],
  ['1000', '1000.0', true],
  ['1000', '1,000.00', true],
  ['.4', '0.4', true],
  ['0.4', '.40', true],
  ['-3', '−3', true],
  ['-3', '3', false],
  ['0', '-0', true],
  ['5', '5.0001', false],
  ['5', '6', false],
  ['12345678901234567890', '12345678901234567890', true],
  ['1.5\\times10^{3}', '1500', true],
  ['1e3', '1000', true],
  ['100.00001', '100', true],
  ['100.001', '100', false],
  // fractions and a/b
  ['1/2', '0.5', true],
  ['\\frac{1}{2}', '0.5', true],
  ['\\frac12', '\\frac{1}{2}', true],
  ['\\frac1{2}', '1/2', true],
  ['\\dfrac{3}{4}', '0.75', true],
  ['\\tfrac{3}{4}', '3/4', true],
  ['\\frac{1}{3}', '0.3333333', true],
  ['\\frac{1}{3}', '0.33', false],
  ['\\frac{2}{3}', '0.6666667', true],
  ['2\\frac{1}{2}', '2.5', true],
  ['-\\frac{1}{2}', '\\frac{-1}{2}', true],
  ['-\\frac{1}{2}', '-0.5', true],
  ['-\\frac{1}{2}', '0.5', false],
  ['3', '\\frac{6}{2}', true],
  ['0.1', '\\frac{1}{10}', true],
  ['\\frac{3}{4}', '\\frac{4}{3}', false],
  // math delimiters, \left/\right, spacing macros
  ['$18$', '18', true],
  ['\\(18\\)', '18', true],
  ['\\[18\\]', '18', true],
  ['$$\\frac{1}{2}$$', '1/2', true],
  ['\\left( 1, 2 \\right)', '(1,2)', true],
  ['\\left[0,1\\right)', '[0,1)', true],
  ['3\\!\\cdot\\!4', '12', true],
  ['\\displaystyle\\frac{1}{2}', '0.5', true],
  // units, \text{…}, currency, word answers
  ['10', '10\\text{ cm}', true],
  ['10', '10 \\text{cm}^2', true],
  ['12\\pi', '12\\pi \\text{ square units}', true],
  ['18', '\\$18', true],
  ['18', '$18', true],
  ['18', '18 dollars', true],
  ['18', '18 apples', true],
  ['4.5', '\\frac{9}{2}\\text{ units}', true],
  ['5\\sqrt{2}', '5\\sqrt{2}\\text{ cm}', true],
  ['10', '10 km/h', true],
  ['10', '11 cm', false],
  ['\\text{Monday}', 'monday', true],
  ['\\text{Monday}', 'Tuesday', false],
  ['east', 'East.', true],
  ['\\text{yes}', '\\textbf{Yes}', true],
  ['\\text{(C)}', 'C', true],
  ['\\text{(C)}', 'D', false],
  ['New York', 'new york', true],
  ['blue', 'red', false],
  ['\\text{even}', '5', false],
  ['5', 'hello', false],
  ['\\text{Monday}', '\\text{monday.}', true],
  // degrees and percent (lenient: 50% = 50 = 0.5)
  ['90^\\circ', '90', true],
  ['90', '90^{\\circ}', true],
  ['90°', '90', true],
  ['90', '90 degrees', true],
  ['30', '\\theta = 30^\\circ', true],
  ['45^\\circ', '90^\\circ', false],
  ['50\\%', '0.5', true],
  ['50%', '50', true],
  ['50\\%', '50', true],
  ['0.5', '50\\%', true],
  ['50\\%', '5', false],
  ['50\\%', '25\\%', false],
  ['12.5\\%', '\\frac{1}{8}', true],
  ['20', '20 percent', true],
  // leading single-variable assignment, trailing period
  ['1', 'k=1', true],
  ['k=1', '1', true],
  ['5', 'x = 5', true],
  ['5', 'x_1=5', true],
  ['2x+3', 'y=2x+3', true],
  ['[0,1)', 'x \\in [0,1)', true],
  ['3', 'x=4', false],
  ['5', '5.', true],
  ['\\frac{1}{2}', '\\frac{1}{2}.', true],
  // \sqrt shorthand, radicals, constants (numeric evaluation)
  ['\\sqrt3', '\\sqrt{3}', true],
  ['\\frac{\\sqrt3}{2}', '\\frac{\\sqrt{3}}{2}', true],
  ['2\\sqrt{2}', '\\sqrt{8}', true],
  ['\\frac{\\sqrt{3}}{2}', '\\frac{1}{2}\\sqrt{3}', true],
  ['\\frac{1}{\\sqrt{2}}', '\\frac{\\sqrt{2}}{2}', true],
  ['\\sqrt{2}', '1.41421356', true],
  ['\\sqrt{2}', '1.414', false],
  ['\\sqrt[3]{8}', '2', true],
  ['√2', '\\sqrt{2}', true],
  ['\\sqrt{2}', '\\sqrt{3}', false],
  ['\\pi', '3.14159265358979', true],
  ['\\pi', '3.14', false],
  ['π', '\\pi', true],
  ['2\\pi', '6.283185307', true],
  ['\\infty', '\\infty', true],
  ['\\infty', '-\\infty', false],
  ['e^{i\\pi}', '-1', true],
  ['0', '\\sin(\\pi)', true],
  ['\\log_2 8', '3', true],
  ['10!', '3628800', true],
  ['\\binom{5}{2}', '10', true],
  ['\\dbinom{5}{2}', '10', true],
  ['2^{10}', '1024', true],
  ['2^{10}', '1000', false],
  ['i^2', '-1', true],
  ['2+3i', '3i+2', true],
  ['2+3i', '2-3i', false],
  ['\\ln(e^2)', '2', true],
  ['1,000,000', '10^6', true],
  // symbolic equivalence with variables
  ['\\frac{x}{7}+\\frac{2}{7}', '\\frac{x+2}{7}', true],
  ['x/7+2/7', '(x+2)/7', true],
  ['(x+1)^2', 'x^2+2x+1', true],
  ['x^2-1', '(x-1)(x+1)', true],
  ['x+1', 'x+2', false],
  ['2x+3y', '3y+2x', true],
  ['\\sin^2 x+\\cos^2 x', '1', true],
  ['\\sqrt{x^2}', 'x', false],
  ['x+1', 'y+1', false],
  ['\\frac{1}{x}', 'x^{-1}', true],
  ['a+b', 'b+a', true],
  ['2x', '2', false],
  ['x^2+y^2=1', 'y^2+x^2=1', true],
  ['\\frac{a}{b}', 'a/b', true],
  ['\\pi r^2', 'r^2\\pi', true],
  ['e^{x}e^{y}', 'e^{x+y}', true],
  ['\\sin x', '\\cos x', false],
  ['sin x', '\\sin x', true],
  ['2 x', '2x', true],
  ['x^3', 'x^2', false],
  // intervals, unions, sets, unordered lists, tuples
  ['[0,1)', '(0,1)', false],
  ['[0,1)', '[0, 1)', true],
  ['(0,1)', '(0,1]', false],
  ['[0,1]', '[0,1]', true],
  ['(-\\infty, 2]', '(-\\infty,2]', true],
  ['(-\\infty, 2]', '(-\\infty,3]', false],
  ['[0,1)\\cup(2,3]', '(2,3]\\cup[0,1)', true],
  ['[0,1)\\cup(2,3]', '[0,1)\\cup[2,3]', false],
  ['(-\\infty,0)\\cup(0,\\infty)', '(-\\infty, 0) \\cup (0, \\infty)', true],
  ['[\\frac{1}{2}, 1]', '[0.5, 1]', true],
  ['[\\frac{1}{2}, 1]', '[\\frac{1}{3}, 1]', false],
  ['1,2', '2,1', true],
  ['1, 2, 3', '3,1,2', true],
  ['1,2', '1,3', false],
  ['1,2', '1,2,3', false],
  ['1,2', '1', false],
  ['1, 2', 'x=2, x=1', true],
  ['\\sqrt{2}, -\\sqrt{2}', '-\\sqrt{2},\\sqrt{2}', true],
  ['\\{1,2\\}', '\\{2,1\\}', true],
  ['\\{1,2\\}', '2,1', true],
  ['\\{1,2\\}', '\\{1,2,2\\}', false],
  ['(1,2)', '(1,2)', true],
  ['(1,2)', '(2,1)', false],
  ['(1,2)', '1,2', false],
  ['(1,2)', '\\left(1,2\\right)', true],
  ['(\\frac{1}{2}, 3)', '(0.5, 3)', true],
  ['(1,2,3)', '(1,2)', false],
  ['[1,2]', '(1,2)', false],
  ['\\begin{pmatrix}1\\\\2\\end{pmatrix}', '(1,2)', true],
  ['(x, x^2)', '(x, x\\cdot x)', true],
  ['1\\pm\\sqrt{2}', '1-\\sqrt{2}, 1+\\sqrt{2}', true],
  ['\\pm 3', '3, -3', true],
  ['1\\pm\\sqrt{2}', '1+\\sqrt{2}', false],
  // a comma: thousands separator only for one number in 3-digit groups
  ['1,000', '1000', true],
  ['1,000', '1,000', true],
  ['1,234', '1234', true],
  ['1,2', '12', false],
  ['12,34', '1234', false],
  // golds with a boxed answer inside a solution
  ['The answer is $\\boxed{\\frac{1}{2}}$.', '0.5', true],
  ['\\boxed{\\frac{\\sqrt{3}}{2}}', '\\frac{\\sqrt3}{2}', true],
  ['\\fbox{7}', '7', true],
  ['\\boxed{\\{1,2\\}}', '\\{2,1\\}', true],
  ['So $x=\\boxed{4}$ and #### 5', '4', true],
  // empty answers are not equal; near misses of every kind
  ['5', '', false],
  ['1450000', '1,450,001', false],
  ['1450000', '1450000.4', true],
  ['0.5', '0.05', false],
  ['\\frac{1}{2}', '\\frac{1}{4}', false],
  ['2\\frac{1}{2}', '\\frac{5}{3}', false],
  ['10', '10\\text{ cm}^3 and 5', false],
  ['\\sqrt{3}', '3', false],
  ['x^2', '2x', false],
  ['(x+1)^2', 'x^2+1', false],
  ['\\frac{x}{2}', '\\frac{2}{x}', false],
  ['[1,2]', '[1,3]', false],
  ['\\{1,2\\}', '(1,2)', false],
  ['-1', '1', false],
  ['100', '1000', false],
  ['3.5', '3,5', false],
  ['\\text{no}', '\\text{yes}', false],
];

describe('math answer equivalence (table)', () => {
  test(`the table has at least 150 pairs, both verdicts`, () => {
    assert.ok(PAIRS.length >= 150, `${PAIRS.length} pairs`);
    assert.ok(PAIRS.filter((p) => p[2]).length >= 60);
    assert.ok(PAIRS.filter((p) => !p[2]).length >= 50);
  });
  for (const [gold, answer, want] of PAIRS) {
    test(`${JSON.stringify(gold)} vs ${JSON.stringify(answer)} → ${want}`, async () => {
      const r = await verify(gold, answer);
      assert.equal(r.equal, want, `reason ${r.reason} ${r.detail ?? ''}`);
      // The in-process fast path either agrees or defers to the symbolic engine; it never contradicts it.
      const fast = verifyFast(gold, answer);
      assert.ok(fast.equal === want || fast.reason === 'undecided', `fast path said ${fast.equal} (${fast.reason})`);
    });
  }
  test('verifyMany returns the same verdicts in order, with counts', async () => {
    const { results, stats } = await verifyMany(PAIRS.map(([gold, answer]) => ({ gold, answer })));
    assert.deepEqual(
      results.map((r) => r.equal),
      PAIRS.map((p) => p[2]),
    );
    assert.equal(stats.checked, PAIRS.length);
    assert.equal(stats.equal, PAIRS.filter((p) => p[2]).length);
    assert.equal(stats.timeouts + stats.unparseableGold + stats.other, 0);
    assert.ok(stats.symbolic > 30, `${stats.symbolic} symbolic`);
  });
});

describe('options and reasons', () => {
  test('strict percent reads 50% only as 0.5', async () => {
    assert.equal((await verify('50\\%', '0.5', { percentLenient: false })).equal, true);
    assert.equal((await verify('50\\%', '50', { percentLenient: false })).equal, false);
    assert.equal((await verify('50\\%', '50', { percentLenient: true })).equal, true);
  });
  test('the relative tolerance is configurable', async () => {
    assert.equal((await verify('100', '100.5', { relTol: 1e-2 })).equal, true);
    assert.equal((await verify('100', '100.5')).equal, false);
    assert.deepEqual(verifyFast('100', '100.00001'), { equal: true, reason: 'numeric' });
    assert.deepEqual(verifyFast('7,425,000', '7425000'), { equal: true, reason: 'exact' });
  });
  test('a gold without an answer or that cannot be parsed is reported, not scored', async () => {
    for (const gold of ['', '   ', '#### ', '\\boxed{}', '\\frac{', '5+']) {
      const r = await verify(gold, '5');
      assert.equal(r.equal, null, `gold ${JSON.stringify(gold)}: ${r.reason}`);
      assert.equal(r.reason, 'unparseable-gold');
    }
    const { stats } = await verifyMany([
      { gold: '\\frac{', answer: '1' },
      { gold: '1', answer: '1' },
    ]);
    assert.equal(stats.unparseableGold, 1);
    assert.equal(stats.equal, 1);
  });
  test('an answer that cannot be parsed is not equal', async () => {
    assert.deepEqual(await verify('5', '\\frac{'), { equal: false, reason: 'unparseable-answer' });
  });
  test('with symbolic off, what needs algebra is reported undecided', async () => {
    const { results, stats } = await verifyMany([{ gold: '(x+1)^2', answer: 'x^2+2x+1' }], { symbolic: false });
    assert.equal(results[0]!.reason, 'undecided');
    assert.equal(stats.other, 1);
  });
});

describe('time limits', () => {
  test('a check past its limit is abandoned, counted and reported; the pool goes on', async () => {
    const pool = new SymbolicPool({ size: 1, timeoutMs: 300 });
    try {
      const t0 = performance.now();
      const { results, stats } = await verifyMany(
        [
          { gold: '\\sum_{k=1}^{10^9} k', answer: '5' },
          { gold: '(x+1)^2', answer: 'x^2+2x+1' },
          { gold: '18', answer: '18' },
        ],
        { pool },
      );
      assert.ok(performance.now() - t0 < 20_000);
      assert.deepEqual(results[0], { equal: null, reason: 'timeout', detail: 'no verdict within 300 ms' });
      assert.equal(results[1]!.equal, true);
      assert.equal(results[2]!.equal, true);
      assert.equal(stats.timeouts, 1);
      assert.equal(pool.stats.timeouts, 1);
      assert.equal(pool.stats.started, 2, 'the timed-out worker was replaced');
      assert.deepEqual(await verify('x^2-1', '(x-1)(x+1)', { pool }), { equal: true, reason: 'symbolic' });
      // A per-call limit overrides the pool's.
      assert.equal((await verify('\\prod_{k=1}^{100000} k', '1', { pool, timeoutMs: 50 })).reason, 'timeout');
    } finally {
      await pool.close();
    }
    assert.equal((await pool.check({ gold: '1', answer: '1', relTol: 1e-6, percentLenient: true })).reason, 'error');
  });
  test('idle workers do not keep the process alive', () => {
    const url = new URL('../src/rewards/math-equal.js', import.meta.url).href;
    const code = `import { verify } from ${JSON.stringify(url)};
      const r = await verify('(x+1)^2', 'x^2+2x+1'); console.log(JSON.stringify(r));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { equal: true, reason: 'symbolic' });
  });
});

describe('answer extraction', () => {
  test('the last \\boxed{…}, nested braces, \\fbox, \\boxed without braces', () => {
    assert.equal(extractBoxed('first \\boxed{1} then \\boxed{\\frac{1}{2}}'), '\\frac{1}{2}');
    assert.equal(extractBoxed('\\boxed{\\{1, \\{2\\}\\}}'), '\\{1, \\{2\\}\\}');
    assert.equal(extractBoxed('so \\fbox{42}.'), '42');
    assert.equal(extractBoxed('$\\boxed 5$.'), '5');
    assert.equal(extractBoxed('\\boxed 7.'), '7');
    assert.equal(extractBoxed('no box here'), null);
    assert.equal(extractBoxed('\\boxed{1} and \\boxed{2'), null);
    assert.equal(extractBoxed('\\boxedsomething{3}'), null);
  });
  test('responses: boxed only by default; fallbacks when switched on', () => {
    const text = 'We get 12 apples. The answer is 14.\nDone with 15';
    assert.equal(extractAnswer(text), null);
    assert.equal(extractAnswer(text, { answerIs: true }), '14');
    assert.equal(extractAnswer(text, { lastNumber: true }), '15');
    assert.equal(extractAnswer('Total: $1,250.', { lastNumber: true }), '1,250');
    assert.equal(extractAnswer('so #### 72', { hashes: true }), '72');
    assert.equal(extractAnswer('\\boxed{3} answer: 4', { answerIs: true }), '3');
    assert.equal(extractAnswer('  free text ', { boxed: false, whole: true }), 'free text');
  });
  test('golds: boxed, then ####, then the whole string', () => {
    assert.equal(extractGold('Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72'), '72');
    assert.equal(extractGold('Thus $\\boxed{\\dfrac{1}{2}}$.'), '\\dfrac{1}{2}');
    assert.equal(extractGold(' 3/4 '), '3/4');
    assert.equal(extractGold(''), null);
  });
});

const GSM8K = gsm8kFile('test');

describe('GSM8K test golds', () => {
  test(
    'all 1,319 golds extract and parse as numbers, and equal themselves written differently',
    { skip: gsm8kSkip('test') },
    async () => {
      const rows = readFileSync(GSM8K, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as { question: string; answer: string });
      assert.equal(rows.length, 1319);
      const pairs: { gold: string; answer: string }[] = [];
      for (const [i, row] of rows.entries()) {
        const gold = extractGold(row.answer);
        assert.ok(gold !== null, `row ${i + 1}: no gold`);
        const num = parseNumber(normalizeAnswer(gold));
        assert.ok(num !== null, `row ${i + 1}: gold ${JSON.stringify(gold)} does not parse as a number`);
        const value = Number(num.value.n) / Number(num.value.d);
        const commas = value.toLocaleString('en-US', { maximumFractionDigits: 20 });
        for (const answer of [
          commas,
          `\\boxed{${gold}}`,
          `$${value}$`,
          `${value}.00`,
          `\\$${commas}`,
          `\\text{${value}}`,
        ]) {
          const r = verifyFast(row.answer, answer);
          assert.equal(
            r.equal,
            true,
            `row ${i + 1}: ${JSON.stringify(gold)} vs ${JSON.stringify(answer)}: ${r.reason}`,
          );
          pairs.push({ gold: row.answer, answer });
        }
        assert.equal(verifyFast(row.answer, String(value + 1)).equal, false, `row ${i + 1}: gold + 1`);
      }
      const { stats } = await verifyMany(pairs);
      assert.equal(stats.equal, pairs.length);
      assert.equal(stats.symbolic, 0, 'numbers never need the symbolic engine');
    },
  );
});
