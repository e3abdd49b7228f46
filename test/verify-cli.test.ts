// `hacrl verify` from the outside: one pair, a JSONL file, exit statuses and the summary line.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

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
      const r = hacrl(['--gold', gold!, '--answer', answer!]);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `${want}\n`, `${gold} vs ${answer}`);
    }
  });
  test('an unparseable gold: message on stderr, exit 2', () => {
    const r = hacrl(['--gold', '\\frac{', '--answer', '1']);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /unparseable-gold/);
  });
  test('a time-out: message on stderr, exit 3', () => {
    const r = hacrl(['--gold', '\\sum_{k=1}^{10^9} k', '--answer', '5', '--timeout-ms', '200']);
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
    const r = hacrl(['--input', input, '--output', output, '--timeout-ms', '300']);
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
    assert.match(r.stderr, /checked 7, equal 4, not equal 1, timeouts 1, unparseable golds 1, other 0 \(symbolic 2\)/);
  });
  test('without --output the rows go to standard output', async () => {
    const input = join(root, 'one.jsonl');
    await writeFile(input, '{"gold": "18", "answer": "18.0"}\n');
    const r = hacrl(['--input', input]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, '{"equal":true,"reason":"exact"}\n');
  });
  test('a bad row names the file and line', async () => {
    const input = join(root, 'bad.jsonl');
    await writeFile(input, '{"gold": "1", "answer": "1"}\n{"gold": "1"}\n');
    const r = hacrl(['--input', input]);
    assert.equal(r.status, 1);
    assert.ok(r.stderr.includes(`${input}:2:`), r.stderr);
  });
});
