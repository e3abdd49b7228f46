// A character tokenizer saved and loaded back (as a tokenizer.json BPE without merges or unk token) refuses
// characters outside its alphabet instead of dropping them silently.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { loadTokenizer } from '../src/tokenizer/load.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-char-'));
after(() => rm(root, { recursive: true, force: true }));

test('characters outside the alphabet are refused, in memory and after a reload', async () => {
  const tok = new CharTokenizer({ alphabet: '0123456789+-= ', specialTokens: ['<eos>'], names: { eos: '<eos>' } });
  await tok.save(root);
  const loaded = await loadTokenizer(root);
  for (const t of [tok, loaded]) {
    assert.throws(() => t.encode('12+é3='), /character "é" \(U\+00E9\) is not in the/);
    assert.throws(() => t.encode('x'), /character "x"/);
    // Special tokens and the alphabet still encode, the same ids before and after the reload.
    assert.deepEqual(t.encode('12+3=<eos>'), tok.encode('12+3=<eos>'));
    assert.equal(t.decode(t.encode('1 + 2 = 3<eos>')), '1 + 2 = 3<eos>');
  }
  assert.throws(() => loaded.encode('é'), /has no unknown token: it would be dropped silently/);
});
