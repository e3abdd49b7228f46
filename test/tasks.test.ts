import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WORD_ITEMS, WORD_NAMES, WORD_TEMPLATES } from '../src/tasks/generators/word.js';
import type { Problem } from '../src/tasks/problem.js';
import {
  datasetName,
  makeTaskDataset,
  presetSpec,
  TASK_NAMES,
  type SplitName,
  type TaskName,
  type TaskSpec,
} from '../src/tasks/splits.js';

// ---- An independent exact evaluator: rationals on BigInt, and a recursive-descent parser for + - * / ( ) ----

type Q = { n: bigint; d: bigint };
const gcd = (a: bigint, b: bigint): bigint => {
  a = a < 0n ? -a : a;
  b = b < 0n ? -b : b;
  while (b) [a, b] = [b, a % b];
  return a;
};
const q = (n: bigint, d = 1n): Q => {
  assert.notEqual(d, 0n, 'division by zero');
  const g = gcd(n, d) * (d < 0n ? -1n : 1n);
  return { n: n / g, d: d / g };
};
const qEq = (a: Q, b: Q): boolean => a.n * b.d === b.n * a.d;
const qText = (a: Q): string => (a.d === 1n ? `${a.n}` : `${a.n}/${a.d}`);

/** Evaluates integer arithmetic with + - * /, unary minus and parentheses exactly. */
function evalExact(src: string): Q {
  let i = 0;
  const peek = (): string => src[i] ?? '';
  const atom = (): Q => {
    if (peek() === '-') {
      i++;
      const v = atom();
      return q(-v.n, v.d);
    }
    if (peek() === '(') {
      i++;
      const v = sum();
      assert.equal(src[i++], ')', `missing ) in ${src}`);
      return v;
    }
    const m = /^\d+/.exec(src.slice(i));
    assert.ok(m, `number expected at ${i} in ${JSON.stringify(src)}`);
    i += m[0].length;
    return q(BigInt(m[0]));
  };
  const product = (): Q => {
    let v = atom();
    while (peek() === '*' || peek() === '/') {
      const op = src[i++];
      const r = atom();
      v = op === '*' ? q(v.n * r.n, v.d * r.d) : q(v.n * r.d, v.d * r.n);
    }
    return v;
  };
  const sum = (): Q => {
    let v = product();
    while (peek() === '+' || peek() === '-') {
      const sign = src[i++] === '+' ? 1n : -1n;
      const r = product();
      v = q(v.n * r.d + sign * r.n * v.d, v.d * r.d);
    }
    return v;
  };
  const v = sum();
  assert.equal(i, src.length, `trailing text in ${JSON.stringify(src)}`);
  return v;
}

// ---- What every generated problem must satisfy ----

const make = (spec: Omit<TaskSpec, 'n' | 'seed' | 'split'> & Partial<TaskSpec>): Problem[] =>
  makeTaskDataset({ split: 'train', n: 300, seed: 1, ...spec } as TaskSpec).problems;

/** The answer recomputed from the prompt alone, per task. */
function recompute(p: Problem): string {
  if (p.task === 'arith' || p.task === 'expr' || p.task === 'fraction') {
    const m = /^What is (.+)\?$/.exec(p.prompt);
    assert.ok(m, p.prompt);
    return qText(evalExact(m[1]!));
  }
  if (p.task === 'linear') {
    const m = /^Solve for x: (-?\d+)x([+-]\d+)=(-?\d+)\.$/.exec(p.prompt);
    assert.ok(m, p.prompt);
    const [a, b, c] = [BigInt(m[1]!), BigInt(m[2]!), BigInt(m[3]!)];
    assert.equal((c - b) % a, 0n, `${p.prompt} has no integer solution`);
    return `${(c - b) / a}`;
  }
  if (p.task === 'word') return recomputeWord(p.prompt);
  throw new Error(`unknown task ${p.task}`);
}

function recomputeWord(text: string): string {
  const n = (text.match(/\d+/g) ?? []).map(BigInt);
  const rules: [RegExp, (v: bigint[]) => bigint][] = [
    [/buys \d+ \w+ at \d+ dollars each\. How many dollars/, ([a, b]) => a! * b!],
    [/buys \d+ \w+ at \d+ dollars each and pays with \d+ dollars/, ([a, b, c]) => c! - a! * b!],
    [/is \d+ years old\. \w+ is \d+ years older than \w+\. How old is/, ([a, b]) => a! + b!],
    [/How old will \w+ be in \d+ years/, ([a, b, c]) => a! + b! + c!],
    [/shares \d+ \w+ equally among \d+ friends/, ([a, b]) => a! / b!],
    [/has \d+ \w+ and buys \d+ more, then shares them equally among \d+ friends/, ([a, b, c]) => (a! + b!) / c!],
    [/^\w+ saves \d+ dollars a week for \d+ weeks/, ([a, b]) => a! * b!],
    [/has \d+ dollars and saves \d+ dollars a week for \d+ weeks/, ([a, b, c]) => a! + b! * c!],
  ];
  const hits = rules.filter(([re]) => re.test(text));
  assert.equal(hits.length, 1, `exactly one template should match: ${text}`);
  if (/shares/.test(text)) {
    const total = hits[0]![0].source.includes('buys') ? n[0]! + n[1]! : n[0]!;
    assert.equal(total % n.at(-1)!, 0n, `sharing must divide exactly: ${text}`);
  }
  return `${hits[0]![1](n)}`;
}

/** Every "lhs=rhs=…" part of every step (before ", " or "; ") without an x evaluates to the same value. */
function checkSteps(p: Problem): void {
  const lines = p.solution.split('\n');
  assert.equal(lines.at(-1), `\\boxed{${p.answer}}`, `last line of ${JSON.stringify(p.solution)}`);
  for (const line of lines.slice(0, -1)) {
    const parts = line
      .split(/[,;] /)[0]!
      .split('=')
      .filter((s) => !s.includes('x'));
    for (const part of parts.slice(1)) assert.ok(qEq(evalExact(part), evalExact(parts[0]!)), `${line} (${p.prompt})`);
  }
}

function checkProblems(problems: Problem[]): void {
  assert.ok(problems.length > 0);
  for (const p of problems) {
    assert.equal(p.answer, recompute(p), p.prompt);
    checkSteps(p);
    assert.match(p.id, new RegExp(`^${p.task}-[0-9a-f]{12}$`));
  }
  assert.equal(new Set(problems.map((p) => p.prompt)).size, problems.length, 'no problem twice in a split');
  assert.equal(new Set(problems.map((p) => p.id)).size, problems.length, 'ids are unique');
}

const BASE: TaskName[] = ['arith', 'expr', 'linear', 'fraction', 'word'];

// ---- Tests ----

test('every generator: exact answers, correct steps, solutions ending in \\boxed{answer}, easy and hard knobs', () => {
  checkProblems(make({ task: 'arith', difficulty: { operators: '+-*' } }));
  checkProblems(make({ task: 'arith', difficulty: { digits: 7, digits2: 4, operators: '+-*' } }));
  checkProblems(make({ task: 'arith', difficulty: { digits: 25, digits2: 25, operators: '+-*' } }));
  checkProblems(make({ task: 'expr' }));
  checkProblems(make({ task: 'expr', difficulty: { operations: 7, maxOperand: 50 } }));
  checkProblems(make({ task: 'linear' }));
  checkProblems(make({ task: 'linear', difficulty: { minCoef: 20, maxCoef: 99, maxX: 50, maxConst: 500 } }));
  checkProblems(make({ task: 'fraction' }));
  checkProblems(make({ task: 'fraction', difficulty: { minDen: 10, maxDen: 40 } }));
  checkProblems(make({ task: 'word' }));
  checkProblems(make({ task: 'word', difficulty: { minNumber: 50, maxNumber: 500 } }));
  checkProblems(make({ task: 'mix', n: 500 }));
  for (const task of TASK_NAMES) checkProblems(make({ task, split: 'ood', n: 100 } as TaskSpec));
});

test('column solutions: the written digits, read bottom-up, are the answer', () => {
  const problems = make({ task: 'arith', difficulty: { digits: 4, digits2: 3, operators: '+-' } }).concat(
    make({ task: 'arith', difficulty: { digits: 5, digits2: 1, operators: '*' } }),
  );
  for (const p of problems) {
    const written = p.solution
      .split('\n')
      .slice(0, -1)
      .map((l) => /, write (\d+)/.exec(l)![1]!);
    const digits = written
      .reverse()
      .join('')
      .replace(/^0+(?=\d)/, '');
    assert.equal(digits, p.answer, p.solution);
  }
  const [easy] = make({ task: 'arith', n: 1, difficulty: { digits: 2, digits2: 2, operators: '+' } });
  assert.match(easy!.solution, /^\d\+\d=\d+, write \d( carry 1)?\n\d\+\d(\+1)?=\d+, write \d+\n\\boxed\{\d+\}$/);
});

test('fraction answers are in lowest terms; linear answers are the value of x', () => {
  for (const p of make({ task: 'fraction', n: 500 })) {
    const [n, d = '1'] = p.answer.split('/');
    assert.equal(gcd(BigInt(n!), BigInt(d)), 1n, p.answer);
    if (p.answer.includes('/')) assert.ok(BigInt(d) > 1n);
  }
  for (const p of make({ task: 'linear' })) assert.match(p.answer, /^-?\d+$/);
});

test('the same seed gives the same problems; other seeds, other problems; a larger n extends a smaller one', () => {
  for (const task of TASK_NAMES) {
    const a = make({ task, n: 50, seed: 7 });
    assert.deepEqual(make({ task, n: 50, seed: 7 }), a, task);
    const b = make({ task, n: 50, seed: 8 });
    assert.notDeepEqual(
      a.map((p) => p.prompt),
      b.map((p) => p.prompt),
      task,
    );
    assert.deepEqual(make({ task, n: 80, seed: 7 }).slice(0, 50), a, task);
  }
});

test('train and test never share a problem, whatever the seeds', () => {
  for (const task of TASK_NAMES) {
    const train = new Set(make({ task, n: 1500, seed: 1 }).map((p) => p.prompt));
    for (const [split, seed] of [
      ['test', 1],
      ['test', 2],
      ['ood', 1],
    ] as [SplitName, number][]) {
      const shared = make({ task, split, seed, n: 300 }).filter((p) => train.has(p.prompt));
      assert.deepEqual(shared, [], `${task} ${split} seed ${seed}`);
    }
  }
  // Word problems differ in their numbers, not only in names and items.
  const words = new RegExp(`\\b(${[...WORD_NAMES, ...WORD_ITEMS].join('|')})\\b`, 'g');
  const numbersOf = (p: Problem): string => p.prompt.replace(words, '_');
  const trainWords = new Set(make({ task: 'word', n: 1500 }).map(numbersOf));
  assert.ok(make({ task: 'word', split: 'test', n: 300 }).every((p) => !trainWords.has(numbersOf(p))));
});

test('OOD splits exceed the train difficulty along their axis', () => {
  const max = (ps: Problem[], k: string): number => Math.max(...ps.map((p) => p.difficulty[k]!));
  const min = (ps: Problem[], k: string): number => Math.min(...ps.map((p) => p.difficulty[k]!));
  const pair = (task: TaskName): [Problem[], Problem[]] => [
    make({ task, n: 400 } as TaskSpec),
    make({ task, split: 'ood', n: 200 } as TaskSpec),
  ];
  const [at, ao] = pair('arith');
  assert.ok(min(ao, 'digits') > max(at, 'digits') && min(ao, 'digits2') > max(at, 'digits2'));
  const [et, eo] = pair('expr');
  assert.ok(min(eo, 'operations') > max(et, 'operations'));
  const [lt, lo] = pair('linear');
  assert.ok(min(lo, 'coef') > max(lt, 'coef'));
  const [ft, fo] = pair('fraction');
  assert.ok(min(fo, 'minDen') > max(ft, 'maxDen'));
  const [wt, wo] = pair('word');
  // Derived numbers (a total to share, a price paid) can be large in train too; every drawn one is beyond train's.
  assert.ok(min(wo, 'minNumber') > 20 && max(wt, 'minNumber') <= 20);
  assert.ok(min(wo, 'maxNumber') > 20);
  const mixOod = make({ task: 'mix', split: 'ood', n: 300 });
  assert.deepEqual(new Set(mixOod.map((p) => p.task)), new Set(BASE));
  assert.ok(mixOod.filter((p) => p.task === 'arith').every((p) => p.difficulty['digits']! >= 3));
  assert.equal(datasetName({ task: 'arith', split: 'ood' }), 'arith-test-ood-digits');
  assert.equal(makeTaskDataset({ task: 'expr', split: 'ood', n: 1, seed: 0 }).name, 'expr-test-ood-steps');
});

test('the mild OOD split: every 2-digit problem with one operand written 0d, and no train or test problem', () => {
  // The 'easy' knobs (2 and 2 digits, + and -) shifted: a in 10..99 and b in 0..9 written "0b" give a+0b and 0b+a
  // (900 each) and, the larger operand first, a-0b (900): 2,700 problems, all of them in the split.
  const expected = new Set<string>();
  for (let a = 10; a <= 99; a++)
    for (let b = 0; b <= 9; b++)
      for (const q of [`${a}+0${b}`, `0${b}+${a}`, `${a}-0${b}`]) expected.add(`What is ${q}?`);
  assert.equal(expected.size, 2700);
  const spec = presetSpec('easy', 'ood-mild', 2700, 3);
  const all = makeTaskDataset(spec).problems;
  assert.deepEqual(new Set(all.map((p) => p.prompt)), expected);
  assert.throws(() => makeTaskDataset({ ...spec, n: 2701 }), /found only 2700 of 2701/);
  const byPrompt = new Map(all.map((p) => [p.prompt, p]));
  // Hand-worked members: the value ignores the zero, the columns are the trained two.
  assert.equal(byPrompt.get('What is 28+06?')!.answer, '34');
  assert.equal(byPrompt.get('What is 28+06?')!.solution, '8+6=14, write 4 carry 1\n2+0+1=3, write 3\n\\boxed{34}');
  assert.equal(byPrompt.get('What is 07+38?')!.answer, '45');
  assert.equal(byPrompt.get('What is 57-09?')!.solution, '17-9=8, write 8 borrow 1\n5-1-0=4, write 4\n\\boxed{48}');
  assert.deepEqual(byPrompt.get('What is 40-00?')!.difficulty, { digits: 2, digits2: 1, leadingZero: 1 });
  // Not members: the trained form, a 1-digit operand without its zero, a difference that would be negative.
  for (const q of ['What is 47+38?', 'What is 47+8?', 'What is 07-38?', 'What is 007+38?'])
    assert.ok(!byPrompt.has(q), q);
  // Disjoint from the training distribution on both sides of the train/test hash: no trained operand starts with 0.
  const trained = [presetSpec('easy', 'train', 3000, 3), presetSpec('easy', 'test', 1500, 3)].flatMap(
    (s) => makeTaskDataset(s).problems,
  );
  assert.ok(trained.every((p) => /^What is [1-9]\d[+-][1-9]\d\?$/.test(p.prompt)));
  assert.ok(trained.every((p) => !expected.has(p.prompt)));
  assert.equal(datasetName({ task: 'arith', split: 'ood-mild' }), 'arith-test-ood-leading-zero');
  // Wider knobs keep the length: one of the two operands loses a digit to the zero.
  for (const p of make({ task: 'arith', split: 'ood-mild', n: 200, difficulty: { digits: 3, digits2: 2 } })) {
    const [, x, op, y] = /^What is (\d+)([+-])(\d+)\?$/.exec(p.prompt)!;
    assert.deepEqual([x!.length, y!.length].sort(), [2, 3], p.prompt);
    assert.equal([x!, y!].filter((v) => v.startsWith('0')).length, 1, p.prompt);
    assert.equal(p.answer, `${op === '+' ? Number(x) + Number(y) : Number(x) - Number(y)}`, p.prompt);
  }
  assert.throws(() => make({ task: 'arith', split: 'ood-mild', difficulty: { digits: 1, digits2: 1 } }), /2\+ digits/);
  assert.throws(() => make({ task: 'arith', split: 'ood-mild', difficulty: { leadingZero: 1 } }), /already/);
  assert.throws(() => make({ task: 'expr', split: 'ood-mild' }), /no 'ood-mild' split/);
});

test('difficulty knobs change what they claim', () => {
  const arith = make({ task: 'arith', difficulty: { digits: 4, digits2: 2, operators: '*' } });
  assert.ok(arith.every((p) => /^What is \d{4}\*\d{2}\?$/.test(p.prompt)));
  assert.ok(make({ task: 'arith', difficulty: { operators: '-' } }).every((p) => !/[+*]/.test(p.prompt)));

  for (const operations of [1, 3, 6]) {
    const ps = make({ task: 'expr', n: 30, difficulty: { operations, maxOperand: 5, operators: '+*' } });
    for (const p of ps) {
      const body = p.prompt.slice('What is '.length, -1);
      assert.equal(body.match(/[+*]/g)!.length, operations, p.prompt);
      assert.equal(p.solution.split('\n').length, operations + 1, 'one line per operation');
      assert.ok(body.match(/\d+/g)!.every((v) => Number(v) >= 1 && Number(v) <= 5));
      assert.ok(!body.includes('-'));
    }
  }
  assert.ok(make({ task: 'expr', difficulty: { operations: 4 } }).some((p) => p.prompt.includes('(')));

  const lin = make({
    task: 'linear',
    n: 50,
    difficulty: { minCoef: 3, maxCoef: 4, maxX: 6, maxConst: 5, negative: 0 },
  });
  for (const p of lin) {
    assert.ok(p.difficulty['coef']! >= 3 && p.difficulty['coef']! <= 4 && p.difficulty['x']! <= 6);
    assert.ok(p.difficulty['const']! <= 5 && !p.prompt.slice(13).includes('-'), p.prompt);
  }
  assert.ok(make({ task: 'linear' }).some((p) => p.answer.startsWith('-')));

  const fr = make({ task: 'fraction', n: 100, difficulty: { minDen: 5, maxDen: 7, operators: '*' } });
  assert.ok(fr.every((p) => p.difficulty['minDen']! >= 5 && p.difficulty['maxDen']! <= 7 && p.prompt.includes('*')));

  const w1 = make({ task: 'word', n: 100, difficulty: { maxSteps: 1, minNumber: 3, maxNumber: 9 } });
  assert.ok(w1.every((p) => p.difficulty['steps'] === 1 && p.solution.split('\n').length === 2));
  assert.ok(w1.every((p) => p.difficulty['minNumber']! >= 3));
  const w2 = make({ task: 'word' });
  assert.deepEqual(new Set(w2.map((p) => p.difficulty['steps'])), new Set([1, 2]));
  assert.equal(WORD_TEMPLATES.length, 4);

  const onlyTwo = make({ task: 'mix', difficulty: { tasks: ['linear', 'word'] } });
  assert.deepEqual(new Set(onlyTwo.map((p) => p.task)), new Set(['linear', 'word']));
});

test('the easy preset: 2-digit addition and subtraction with solutions under 60 characters', () => {
  const ds = makeTaskDataset(presetSpec('easy', 'train', 2000, 3));
  assert.equal(ds.name, 'arith-train');
  assert.ok(ds.problems.every((p) => /^What is \d\d[+-]\d\d\?$/.test(p.prompt)));
  assert.ok(Math.max(...ds.problems.map((p) => p.solution.length)) < 60);
  const mixed = makeTaskDataset(presetSpec('easy-mix', 'test', 300, 3));
  checkProblems(mixed.problems);
  assert.ok(Math.max(...mixed.problems.map((p) => p.solution.length)) < 150);
});

test('bad specs and exhausted problem spaces are reported', () => {
  assert.throws(() => make({ task: 'arith', difficulty: { digits: 0 } }), /arith difficulty: digits must be/);
  assert.throws(() => make({ task: 'arith', difficulty: { operators: '+/' } }), /operators must be/);
  assert.throws(() => make({ task: 'linear', difficulty: { minCoef: 5, maxCoef: 3 } }), /minCoef \(5\) exceeds/);
  assert.throws(() => make({ task: 'mix', difficulty: { tasks: [] } }), /tasks must be/);
  assert.throws(() => make({ task: 'arith', n: -1 }), /n must be/);
  assert.throws(() => make({ task: 'arith', split: 'dev' as SplitName }), /split must be/);
  // One-digit addition has 100 problems, about 20 of them on the test side.
  assert.throws(
    () => make({ task: 'arith', split: 'test', n: 50, difficulty: { digits: 1, digits2: 1, operators: '+' } }),
    /found only \d+ of 50 distinct problems/,
  );
  const repeats = make({ task: 'arith', n: 200, unique: false, difficulty: { digits: 1, digits2: 1, operators: '+' } });
  assert.equal(repeats.length, 200);
});
