// `hacrl verify` from the outside: one pair, a JSONL file, exit statuses and the summary line.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { gsm8kFile, gsm8kSkip } from './gsm8k-data.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-verify-'));
after(() => rm(root, { recursive: true, force: true }));

function hacrl(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('hacrl verify --gold --answer', () => {
  test('prints true or false and exits 0', () => {
    for (const [gold, answer, want] of [
      ['#### 1,600', '\\boxed{1600}', 'true'],
      ['\\frac{x}{7}+\\frac{2}{7}', '(x+2)/7', 'true'],
      ['[0,1)', '(0,1)', 'false'],
      ['5', '-3', 'false'],
    ]) {
      const r = hacrl(['--gold', gold!, '--answer', answer!, '--extracted']);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `${want}\n`, `${gold} vs ${answer}`);
    }
  });
  test('an unparseable gold: message on stderr, exit 2', () => {
    const r = hacrl(['--gold', '\\frac{', '--answer', '1', '--extracted']);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /unparseable-gold/);
  });
  test('a time-out: message on stderr, exit 3', () => {
    const r = hacrl(['--gold', '\\sum_{k=1}^{10^9} k', '--answer', '5', '--timeout-ms', '200', '--extracted']);
    assert.equal(r.status, 3);
    assert.match(r.stderr, /timeout: no verdict within 200 ms/);
  });
  test('usage errors exit 1', () => {
    assert.equal(hacrl(['--gold', '1']).status, 1);
  });
});

describe('hacrl verify --input', () => {
  test('writes {equal, reason} per row and a summary on stderr', async () => {
    const input = join(root, 'pairs.jsonl');
    const rows = [
      { gold: '#### 7,425,000', answer: '7425000' },
      { gold: 'x^2-1', answer: '(x-1)(x+1)' },
      { gold: '1,2', answer: '2,1' },
      { gold: 0.5, answer: '50\\%' },
      { gold: '3', answer: '4' },
      { gold: '', answer: '4' },
      { gold: '\\sum_{k=1}^{10^9} k', answer: '5' },
    ];
    await writeFile(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const output = join(root, 'out.jsonl');
    const r = hacrl(['--input', input, '--output', output, '--timeout-ms', '300', '--extracted']);
    assert.equal(r.status, 0, r.stderr);
    const out = (await readFile(output, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { equal: boolean | null; reason: string });
    assert.deepEqual(
      out.map((o) => [o.equal, o.reason]),
      [
        [true, 'exact'],
        [true, 'symbolic'],
        [true, 'exact'],
        [true, 'exact'],
        [false, 'numeric'],
        [null, 'unparseable-gold'],
        [null, 'timeout'],
      ],
    );
    assert.match(
      r.stderr,
      /checked 7, equal 4, not equal 1, timeouts 1, unparseable golds 1, too long 0, too deep 0, other 0 \(symbolic 2\)/,
    );
  });
  test('without --output the rows go to standard output', async () => {
    const input = join(root, 'one.jsonl');
    await writeFile(input, '{"gold": "18", "answer": "18.0"}\n');
    const r = hacrl(['--input', input, '--extracted']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, '{"equal":true,"reason":"exact","extracted":"18.0"}\n');
  });
  test('a bad row names the file and line', async () => {
    const input = join(root, 'bad.jsonl');
    await writeFile(input, '{"gold": "1", "answer": "1"}\n{"gold": "1"}\n');
    const r = hacrl(['--input', input]);
    assert.equal(r.status, 1);
    assert.ok(r.stderr.includes(`${input}:2:`), r.stderr);
  });
});

describe('hacrl verify reads whole responses', () => {
  test('the last \\boxed{}, then #### N, then "the answer is N"; the row says what was extracted', async () => {
    const input = join(root, 'responses.jsonl');
    const rows = [
      { gold: '7', answer: 'So the answer is \\boxed{7}.' },
      { gold: '18', answer: 'She sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n#### 18' },
      { gold: '42', answer: 'Adding up, the answer is 42.' },
      { gold: '5', answer: 'I first thought \\boxed{4}, but it is \\boxed{5}' },
      { gold: '18', response: '18' },
    ];
    await writeFile(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const r = hacrl(['--input', input]);
    assert.equal(r.status, 0, r.stderr);
    const out = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { equal: boolean; extracted: string | null; by?: string; detail?: string });
    assert.deepEqual(
      out.map((o) => [o.equal, o.extracted, o.by]),
      [
        [true, '7', 'boxed'],
        [true, '18', 'hashes'],
        [true, '42', 'answerIs'],
        [true, '5', 'boxed'],
        [false, null, undefined],
      ],
    );
    assert.match(out[4]!.detail!, /no answer found by boxed, hashes, answerIs \(pass --extracted/);
    // --extract narrows the extractors to what a training run's reward uses.
    const boxedOnly = hacrl(['--gold', '18', '--answer', 'so\n#### 18', '--extract', 'boxed']);
    assert.equal(boxedOnly.stdout, 'false\n');
    assert.equal(hacrl(['--gold', '1', '--answer', '1', '--extract', 'boxes']).status, 1);
  });

  test('every GSM8K test reference solution equals its gold, in under 30 s', { skip: gsm8kSkip('test') }, async () => {
    const solutions = readFileSync(gsm8kFile('test'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { answer: string }).answer);
    assert.equal(solutions.length, 1319);
    const input = join(root, 'gsm8k-solutions.jsonl');
    const gold = (s: string): string => s.slice(s.lastIndexOf('####') + 4).trim();
    await writeFile(input, solutions.map((s) => JSON.stringify({ gold: gold(s), answer: s })).join('\n') + '\n');
    const start = performance.now();
    const r = hacrl(['--input', input, '--output', join(root, 'gsm8k-out.jsonl')]);
    const seconds = (performance.now() - start) / 1000;
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /checked 1319, equal 1319, not equal 0/);
    assert.ok(seconds < 30, `took ${seconds.toFixed(1)} s`);
  });

  test('--timeout-ms above 2^31 - 1 is refused, not turned into 1 ms', () => {
    const r = hacrl(['--gold', '1', '--answer', '1', '--extracted', '--timeout-ms', String(2 ** 31)]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /from 1 to 2147483647/);
  });

  test('invalid UTF-8 is refused with its line; a byte-order mark is accepted', async () => {
    const bad = join(root, 'latin1.jsonl');
    const row = (a: string): Buffer => Buffer.from(`{"gold": "1", "answer": "${a}"}\n`);
    await writeFile(
      bad,
      Buffer.concat([row('1'), row('2'), Buffer.from('{"gold": "1", "answer": "\xe9"}\n', 'latin1')]),
    );
    const r = hacrl(['--input', bad, '--extracted']);
    assert.equal(r.status, 1);
    assert.ok(r.stderr.includes(`${bad}:3: not valid UTF-8`), r.stderr);
    const bom = join(root, 'bom.jsonl');
    await writeFile(bom, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), row('1')]));
    const ok = hacrl(['--input', bom, '--extracted']);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /"equal":true/);
  });
});
