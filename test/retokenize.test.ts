import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  retokenizeResponse,
  sameTokenization,
  spanMean,
  UnencodableTextError,
  type LearnerResponse,
} from '../src/rollout/retokenize.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { Gpt2Tokenizer } from '../src/tokenizer/gpt2-tokenizer.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/tokenizer.js';
import { AgentSpecSchema, buildTokenizer } from '../src/model/agent-spec.js';

// A small math corpus in the shape of the project's prompts and answers, with "×" and "−" so both tokenizers know them.
const CORPUS = [
  "Q: What is 3 × 4? Let's think step by step and output the final answer within \\boxed{}.\nA: ",
  '3 × 4 = 12, so the answer is \\boxed{12}.',
  'Q: Compute 17 − 5 + 2.\nA: 17 − 5 = 12 and 12 + 2 = 14.\nThe answer is \\boxed{14}.',
  'Solve for x: 2x + 6 = 10. Subtract 6: 2x = 4, divide by 2: x = 2. So \\boxed{2}.',
  'The product (8 × 9) − 60 equals 72 − 60 = 12; final: \\boxed{12}',
  'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?()[]{}+-*/=<>|\\\'"',
];
const corpus = Array.from({ length: 30 }, () => CORPUS).flat();
const bpe = buildTokenizer(AgentSpecSchema.parse({ tokenizer: 'bpe', bpeVocab: 400 }), corpus);
const char = buildTokenizer(AgentSpecSchema.parse({ tokenizer: 'char' }), corpus);
const gpt2 = new Gpt2Tokenizer();

// Responses inside the character tokenizer's alphabet: spaces, newlines, \boxed{}, digits, "×" and "−".
const TEXTS = [
  '3 × 4 = 12, so \\boxed{12}.',
  'First, 17 − 5 = 12.\nThen 12 + 2 = 14.\n\nThe answer is \\boxed{14}',
  '  leading spaces and a trailing newline\n',
  'x',
  '(8 × 9) − 60 = 72 − 60 = 12; final: \\boxed{12}',
];

// A non-canonical way to sample the same text: one encode per character (models need not emit canonical BPE).
function perCharIds(tok: Tokenizer, text: string): number[] {
  return Array.from(text).flatMap((ch) => tok.encode(ch));
}

// Fake generator log-probs: token i gets −(i mod 7 + 1)/10 (in [−0.7, −0.1]), the terminal EOS a distinctive −1000.
function fakeLogProbs(ids: readonly number[], stopped: boolean): Float32Array {
  const lp = Float32Array.from(ids, (_, i) => -((i % 7) + 1) / 10);
  if (stopped) lp[lp.length - 1] = -1000;
  return lp;
}

// Mean of the first n entries, written independently of spanMean.
function meanOfFirst(xs: Float32Array, n: number): number {
  return Array.from(xs.subarray(0, n)).reduce((a, b) => a + b, 0) / n;
}

function specialIds(tok: Tokenizer): Set<number> {
  return new Set([...tok.specialTokens.values(), tok.eosId]);
}

// Every property a cross-tokenizer response must have (spec §6).
function checkCross(
  generator: Tokenizer,
  learner: Tokenizer,
  genIds: number[],
  stopped: boolean,
  text: string,
  label: string,
): LearnerResponse {
  const promptIds = learner.encode(renderPrompt(learner, 'What is 3 × 4?'));
  const r = retokenizeResponse(genIds, stopped, generator, learner, promptIds);
  assert.equal(r.promptIds, promptIds, `${label}: learner prompt ids passed through`);
  for (const id of r.responseIds) assert.ok(Number.isInteger(id) && id >= 0 && id < learner.vocabSize, label);
  const body = stopped ? r.responseIds.slice(0, -1) : r.responseIds;
  if (stopped) assert.equal(r.responseIds.at(-1), learner.eosId, `${label}: learner EOS appended`);
  const specials = specialIds(learner);
  assert.ok(!body.some((id) => specials.has(id)), `${label}: no special id inside the response`);
  assert.equal(learner.decode(body), text, `${label}: text kept exactly`);
  assert.equal(r.generatorSpan, genIds.length - (stopped ? 1 : 0), `${label}: span excludes the terminal EOS`);
  const lp = fakeLogProbs(genIds, stopped);
  const want = meanOfFirst(lp, genIds.length - (stopped ? 1 : 0));
  assert.ok(Math.abs(spanMean(lp, r.generatorSpan) - want) < 1e-12, `${label}: span mean excludes the EOS`);
  assert.ok(spanMean(lp, r.generatorSpan) > -1, `${label}: the EOS log-prob (−1000) is not in the mean`);
  return r;
}

const PAIRS: [string, Tokenizer, Tokenizer][] = [
  ['gpt2 → bpe', gpt2, bpe],
  ['bpe → gpt2', bpe, gpt2],
  ['char → bpe', char, bpe],
  ['bpe → char', bpe, char],
  ['gpt2 → char', gpt2, char],
  ['char → gpt2', char, gpt2],
];

test('tokenizers under test: trained BPE and char share the EOS name, differ from GPT-2 and from each other', () => {
  assert.equal(bpe.eosId, bpe.specialTokens.get('<|endoftext|>'));
  assert.equal(char.eosId, char.specialTokens.get('<|endoftext|>'));
  assert.ok(bpe.vocabSize < gpt2.vocabSize && char.vocabSize < bpe.vocabSize);
  for (const [label, g, l] of PAIRS) assert.equal(sameTokenization(g, l), false, label);
  for (const t of TEXTS) assert.equal(char.decode(char.encode(t)), t, 'texts lie inside the char alphabet');
});

test('cross-tokenizer responses keep the text, end with the learner EOS iff stopped, span the EOS-less tokens', () => {
  for (const [label, generator, learner] of PAIRS) {
    for (const text of TEXTS) {
      for (const canonical of [true, false]) {
        const content = canonical ? generator.encode(text) : perCharIds(generator, text);
        for (const stopped of [true, false]) {
          const genIds = stopped ? [...content, generator.eosId] : content;
          const name = `${label} ${JSON.stringify(text)} canonical=${canonical} stopped=${stopped}`;
          const r = checkCross(generator, learner, genIds, stopped, text, name);
          // The learner's ids are its own canonical encoding of the text, whatever the generator sampled.
          assert.deepEqual(r.responseIds.slice(0, stopped ? -1 : undefined), learner.encode(text), name);
        }
      }
    }
  }
});

test('empty and EOS-only responses', () => {
  for (const [label, generator, learner] of PAIRS) {
    const prompt = [learner.eosId];
    // EOS only: the learner gets just its EOS; the generator's mean is over its EOS ("stop at once" on both sides).
    const eosOnly = retokenizeResponse([generator.eosId], true, generator, learner, prompt);
    assert.deepEqual(eosOnly, { promptIds: prompt, responseIds: [learner.eosId], generatorSpan: 1 }, label);
    assert.equal(spanMean(Float32Array.of(-2.5), eosOnly.generatorSpan), -2.5);
    // Nothing at all and not stopped (a truncated empty response): no learner tokens, span 0, mean 0.
    const empty = retokenizeResponse([], false, generator, learner, prompt);
    assert.deepEqual(empty, { promptIds: prompt, responseIds: [], generatorSpan: 0 }, label);
    assert.equal(spanMean([], empty.generatorSpan), 0);
    // "Stopped by EOS" without any id is a contradiction.
    assert.throws(() => retokenizeResponse([], true, generator, learner, prompt), /stoppedByEos is true/);
  }
  // Only special ids before the EOS: empty text, so just the learner EOS; the span is the pad token, not the EOS.
  const pad = bpe.padId!;
  const r = retokenizeResponse([pad, bpe.eosId], true, bpe, gpt2, []);
  assert.deepEqual(r, { promptIds: [], responseIds: [gpt2.eosId], generatorSpan: 1 });
});

test('same tokenization passes ids through unchanged, EOS included in the span', () => {
  const twinBpe = buildTokenizer(AgentSpecSchema.parse({ tokenizer: 'bpe', bpeVocab: 400 }), corpus);
  const twinChar = buildTokenizer(AgentSpecSchema.parse({ tokenizer: 'char' }), corpus);
  const otherBpe = buildTokenizer(AgentSpecSchema.parse({ tokenizer: 'bpe', bpeVocab: 350 }), corpus);
  assert.ok(sameTokenization(bpe, bpe));
  assert.ok(sameTokenization(gpt2, gpt2));
  assert.ok(sameTokenization(bpe, twinBpe), 'separately trained on the same corpus: same vocabulary');
  assert.ok(sameTokenization(twinBpe, bpe), 'symmetric');
  assert.ok(sameTokenization(char, twinChar));
  assert.equal(sameTokenization(bpe, otherBpe), false, 'another vocabulary size');
  assert.equal(sameTokenization(gpt2, new Gpt2Tokenizer()), false, 'documented: only the same GPT-2 object counts');

  for (const [generator, learner] of [
    [bpe, bpe],
    [bpe, twinBpe],
    [char, twinChar],
    [gpt2, gpt2],
  ] as const) {
    // Non-canonical ids stay as sampled: passthrough never re-encodes.
    const content = perCharIds(generator, TEXTS[0]!);
    const ids = [...content, generator.eosId];
    const prompt = learner.encode('Q: 1 + 1\nA: ');
    const r = retokenizeResponse(ids, true, generator, learner, prompt);
    assert.deepEqual(r, { promptIds: prompt, responseIds: ids, generatorSpan: ids.length });
    assert.notEqual(r.responseIds, ids, 'a copy, not the caller array');
    const lp = fakeLogProbs(ids, true);
    assert.ok(Math.abs(spanMean(lp, r.generatorSpan) - meanOfFirst(lp, ids.length)) < 1e-12, 'EOS included');
    const cut = retokenizeResponse(content, false, generator, learner, prompt);
    assert.deepEqual(cut.responseIds, content);
    assert.equal(cut.generatorSpan, content.length);
  }
});

test('special-token strings spelled by the generator stay plain text for the learner', () => {
  // GPT-2 spells "<|endoftext|>" from ordinary pieces; the BPE learner must not read it as its EOS (or "<|pad|>" as pad).
  const text = 'so <|endoftext|> and <|pad|> are just text: \\boxed{12}';
  const pieces = ['so <', '|', 'endoftext', '|> and <|pad|> are just text: \\boxed{12}'].flatMap((p) => gpt2.encode(p));
  assert.equal(gpt2.decode(pieces), text);
  assert.ok(!pieces.includes(gpt2.eosId));
  assert.ok(bpe.encode(text).includes(bpe.eosId), 'plain encode would have made a mid-response EOS');
  for (const stopped of [true, false]) {
    const genIds = stopped ? [...pieces, gpt2.eosId] : pieces;
    checkCross(gpt2, bpe, genIds, stopped, text, `gpt2 → bpe stopped=${stopped}`);
  }
  // And the other way: the BPE spells it from single bytes; GPT-2 as learner must not produce 50256 inside.
  const bytes = perCharIds(bpe, text);
  assert.equal(bpe.decode(bytes), text);
  checkCross(bpe, gpt2, [...bytes, bpe.eosId], true, text, 'bpe → gpt2');
});

test('a truncated response cut inside a multi-byte UTF-8 character keeps the U+FFFD that decode yields', () => {
  // GPT-2 writes "😀" as two byte-level tokens; cut after the first, decode gives U+FFFD (as Rollout.text does).
  const full = gpt2.encode('so 12 😀');
  const cut = full.slice(0, -1);
  const text = gpt2.decode(cut, { skipSpecialTokens: true });
  assert.equal(text, 'so 12 \uFFFD');
  const r = checkCross(gpt2, bpe, cut, false, text, 'gpt2 → bpe cut');
  assert.equal(r.generatorSpan, cut.length, 'every generator token counts, the partial one included');
  // The trained BPE has no merge for "😀" (4 byte tokens); cut after 2 bytes, its decode gives one U+FFFD.
  const bpeCut = bpe.encode('x = 1 😀').slice(0, -2);
  const bpeText = bpe.decode(bpeCut, { skipSpecialTokens: true });
  assert.equal(bpeText, 'x = 1 \uFFFD');
  checkCross(bpe, gpt2, bpeCut, false, bpeText, 'bpe → gpt2 cut');
  // A character learner has no U+FFFD: the sample is reported as unencodable, with the text, for the trainer to drop.
  assert.throws(
    () => retokenizeResponse(cut, false, gpt2, char, []),
    (e: unknown) => e instanceof UnencodableTextError && e.text === text && /U\+FFFD/.test(e.message),
  );
});

test('characters outside a char learner alphabet raise UnencodableTextError, in memory and loaded from its folder', async () => {
  const ids = [...gpt2.encode('café = 12'), gpt2.eosId];
  // A char agent reloaded from its checkpoint is an HfTokenizer: it must refuse too, never train on "caf = 12".
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-retok-'));
  try {
    await char.save(dir);
    const loaded = await loadTokenizer(dir);
    for (const learner of [char, loaded])
      assert.throws(
        () => retokenizeResponse(ids, true, gpt2, learner, []),
        (e: unknown) =>
          e instanceof UnencodableTextError &&
          e.text === 'café = 12' &&
          /"é" \(U\+00E9\) at offset 3 is not in the (alphabet|vocabulary)/.test(e.message),
      );
    // Text inside the alphabet goes through the loaded tokenizer exactly as through the in-memory one.
    const fine = [...gpt2.encode('3 × 4 = 12'), gpt2.eosId];
    assert.deepEqual(
      retokenizeResponse(fine, true, gpt2, loaded, []).responseIds,
      retokenizeResponse(fine, true, gpt2, char, []).responseIds,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('ids outside a vocabulary and inconsistent stop flags are rejected with clear errors', () => {
  assert.throws(
    () => retokenizeResponse([15496, 50257], false, gpt2, bpe, []),
    /generator response ids.*token id 50257 at position 1 is outside the vocabulary \(0\.\.50256\)/,
  );
  // Learner ids given as generator ids: a typical cross-tokenizer mix-up.
  assert.throws(
    () => retokenizeResponse([bpe.vocabSize + 5], false, bpe, gpt2, []),
    /generator response ids.*outside the vocabulary/,
  );
  assert.throws(
    () => retokenizeResponse([1.5], false, gpt2, bpe, []),
    /token id 1\.5 at position 0 is outside the vocabulary/,
  );
  assert.throws(
    () => retokenizeResponse(gpt2.encode('hi'), false, gpt2, bpe, [bpe.vocabSize]),
    /learner prompt ids.*outside the vocabulary/,
  );
  // A stop-string ending (last id an ordinary token) is not an EOS stop.
  assert.throws(
    () => retokenizeResponse(gpt2.encode('hi there'), true, gpt2, bpe, []),
    /stoppedByEos is true but the generator's last id is 612, not its EOS \(50256\)/,
  );
  assert.throws(
    () => retokenizeResponse([...gpt2.encode('hi'), gpt2.eosId], false, gpt2, bpe, []),
    /stoppedByEos is false but the generator's last id is its EOS \(50256\)/,
  );
  // Another special stop token of the generator (here bpe's pad) ends a stopped response like its EOS.
  const r = retokenizeResponse([...bpe.encode('12'), bpe.padId!], true, bpe, gpt2, []);
  assert.deepEqual(r, {
    promptIds: [],
    responseIds: [...gpt2.encode('12'), gpt2.eosId],
    generatorSpan: bpe.encode('12').length,
  });
});

test('spanMean: mean of the first span entries; 0 for an empty span; errors for bad spans', () => {
  assert.equal(spanMean([-1, -2, -3, -1000], 3), -2);
  assert.equal(spanMean(Float32Array.of(-0.5, -1.5), 2), -1);
  assert.equal(spanMean([-7], 0), 0);
  assert.throws(() => spanMean([-1, -2], 3), /span 3 is longer than the 2 log-probs/);
  assert.throws(() => spanMean([-1], -1), /span must be a non-negative integer, got -1/);
  assert.throws(() => spanMean([-1], 0.5), /span must be a non-negative integer, got 0\.5/);
});
