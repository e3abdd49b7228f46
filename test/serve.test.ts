// `hacrl serve` driven by the official openai client: both endpoints, streamed and not, the same tokens as generate,
// stop strings that a stream never shows, top log-probs that are log-probs, batching that changes no token, and bad
// requests answered with 4xx while the server keeps serving.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { engine } from '../src/backend/engine.js';
import { loadServedModels } from '../src/cli/serve.js';
import { generate } from '../src/model/generate.js';
import { loadPretrained, type Pretrained } from '../src/model/pretrained.js';
import type { Transformer } from '../src/model/transformer.js';
import { Batcher, type SampledToken } from '../src/serve/batcher.js';
import { HacrlServer } from '../src/serve/server.js';
import { TextStream } from '../src/serve/text-stream.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { hacrl, startHacrlServe } from './cli.js';
import { near } from './helpers.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-serve-'));
const dir = join(root, 'agent');
/** A PEFT adapter folder on `dir`, served beside it as "lora". */
const adapterDir = join(root, 'adapter');
let agent: Pretrained;
let client: OpenAI;
let baseURL: string;
let stopServer: () => Promise<number | null>;

before(async () => {
  await saveTinyAgent(dir, 'llama');
  agent = await loadPretrained(dir);
  await saveTinyAdapter(adapterDir, dir, 3);
  ({ baseURL, stop: stopServer } = await startHacrlServe([
    '--model',
    `tiny=${dir}`,
    `lora=${adapterDir}`,
    '--port',
    '0',
  ]));
  // One retry, which the SDK makes on connection errors only (and 408/409/429/5xx, which these tests never expect):
  // a test that blocks the event loop past the server's 5 s keep-alive (checking 32 streams against generate() on a
  // loaded machine) lets the server close an idle pooled socket that the next request then picks up.
  client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 1, timeout: 30_000 });
});

after(async () => {
  await stopServer?.();
  await rm(root, { recursive: true, force: true });
});

/** What generate gives for `prompt` alone: the text (special tokens dropped) and the log-probs. */
function reference(prompt: number[], o: { seed: number; maxTokens: number; temperature: number; topP?: number }) {
  const [g] = generate(agent.model, engine(), [prompt], {
    seed: o.seed,
    maxNewTokens: o.maxTokens,
    temperature: o.temperature,
    topP: o.topP ?? 1,
    stopTokens: [agent.tokenizer.eosId],
  });
  return { text: agent.tokenizer.decode(g!.ids, { skipSpecialTokens: true }), logProbs: g!.logProbs, ids: g!.ids };
}

const chatPrompt = (content: string): number[] =>
  agent.tokenizer.encode(agent.tokenizer.applyChatTemplate([{ role: 'user', content }], { addGenerationPrompt: true }));

test('/v1/models lists the served models', async () => {
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ['tiny', 'lora'],
  );
});

test('a served adapter folder answers greedily as `hacrl eval` and generate of the same folder, not as its base', async () => {
  const question = 'what is 12 + 30?';
  const maxTokens = 16;
  const data = join(root, 'one.jsonl');
  await writeFile(data, `${JSON.stringify({ prompt: question, answer: '42' })}\n`);
  const report = join(root, 'eval.json');
  const e = hacrl([
    'eval',
    '--model',
    adapterDir,
    '--data',
    data,
    '--template',
    '{question}',
    '--max-new-tokens',
    String(maxTokens),
    '--output',
    report,
  ]);
  assert.equal(e.status, 0, e.stderr);
  const [evaluated] = JSON.parse(await readFile(report, 'utf8')) as { problems: { greedy: { response: string } }[] }[];
  const fromEval = evaluated!.problems[0]!.greedy.response;
  // eval renders the question with the tokenizer's chat template: the same prompt as a one-message chat request.
  const ask = async (model: string): Promise<string> => {
    const r = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: question }],
      max_tokens: maxTokens,
      temperature: 0,
    });
    return r.choices[0]!.message.content ?? '';
  };
  const served = await ask('lora');
  assert.ok(served.length > 0, 'an answer to compare');
  assert.equal(served, fromEval);
  const loaded = await loadPretrained(adapterDir);
  assert.ok(loaded.model.adapters, 'loaded with its adapters');
  const [g] = generate(loaded.model, engine(), [chatPrompt(question)], {
    temperature: 0,
    maxNewTokens: maxTokens,
    stopTokens: [loaded.tokenizer.eosId],
  });
  assert.equal(served, loaded.tokenizer.decode(g!.ids, { skipSpecialTokens: true }));
  assert.notEqual(served, await ask('tiny'), 'the adapters change the answer');
});

test('adapter folders on one base share its tensors, loaded once, and at fp32 with the base served beside them', async () => {
  const second = join(root, 'adapter-2');
  await saveTinyAdapter(second, dir, 5);
  const dirs = new Map([
    ['a', adapterDir],
    ['b', second],
    ['tiny', dir],
  ]);
  /** The storage of a tensor: float32 values, or bfloat16 bits (a frozen base's matrices at bf16). */
  const storage = (m: Transformer, name: string): unknown => {
    const t = m.params.get(name)!;
    return t.bf16 ?? t.data;
  };
  for (const precision of ['fp32', 'bf16'] as const) {
    const models = await loadServedModels(dirs, precision);
    const [a, b, base] = ['a', 'b', 'tiny'].map((n) => models.get(n)!.model) as [Transformer, Transformer, Transformer];
    assert.ok(a.adapters && b.adapters && !base.adapters, 'two adapted models and a whole one');
    assert.equal(a.params.size, base.params.size);
    let bits = 0;
    for (const name of base.params.keys()) {
      assert.equal(storage(a, name), storage(b, name), `${precision} ${name}: one base under both adapters`);
      if (precision === 'fp32') assert.equal(storage(a, name), storage(base, name), `${name}: the served base itself`);
      if (a.params.get(name)!.bf16) bits++;
    }
    assert.equal(bits > 0, precision === 'bf16', 'a bf16 base holds its matrices as bfloat16 bits');
    assert.notDeepEqual([...a.adapters.params.values()][1]!.data, [...b.adapters.params.values()][1]!.data);
  }
});

test('two adapter folders served together complete as each does served alone', async () => {
  const second = join(root, 'adapter-3');
  await saveTinyAdapter(second, dir, 7);
  /** The completions of `hacrl serve` over `specs` (NAME=DIR), for each served name. */
  const serve = async (specs: string[]): Promise<OpenAI.Completions.CompletionChoice[][]> => {
    const s = await startHacrlServe(['--model', ...specs, '--port', '0']);
    try {
      const own = new OpenAI({ baseURL: s.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
      const out = [];
      for (const spec of specs) {
        const model = spec.slice(0, spec.indexOf('='));
        const body = { model, prompt: 'the answer is', max_tokens: 12, temperature: 0.9, seed: 11, logprobs: 1 };
        out.push((await own.completions.create(body)).choices);
      }
      return out;
    } finally {
      await s.stop();
    }
  };
  const [a, b] = await serve([`a=${adapterDir}`, `b=${second}`]);
  const [aAlone] = await serve([`a=${adapterDir}`]);
  const [bAlone] = await serve([`b=${second}`]);
  assert.equal(a![0]!.logprobs!.token_logprobs!.length, 12);
  assert.deepEqual(a, aAlone);
  assert.deepEqual(b, bAlone);
  assert.notDeepEqual(a, b, 'the two adapters answer differently');
});

test('a completion has the tokens and log-probs of generate with the same seed, streamed or not, every time', async () => {
  const prompt = 'the answer is';
  const ref = reference(agent.tokenizer.encode(prompt), { seed: 11, maxTokens: 20, temperature: 0.9 });
  const body = { model: 'tiny', prompt, max_tokens: 20, temperature: 0.9, seed: 11, logprobs: 2 };
  const a = await client.completions.create(body);
  assert.equal(a.choices[0]!.text, ref.text);
  const lp = a.choices[0]!.logprobs!;
  assert.equal(lp.token_logprobs!.length, ref.logProbs.length);
  lp.token_logprobs!.forEach((x, i) => assert.ok(Math.abs(x - ref.logProbs[i]!) < 1e-5, `token ${i}`));
  assert.equal(Object.keys(lp.top_logprobs![0]!).length, 2);
  assert.equal(a.usage!.completion_tokens, ref.ids.length);
  const again = await client.completions.create(body);
  assert.equal(again.choices[0]!.text, ref.text, 'the same seed gives the same text');
  let streamed = '';
  let finish: string | null = null;
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(streamed, ref.text);
  assert.equal(finish, a.choices[0]!.finish_reason);
  const other = await client.completions.create({ ...body, seed: 12 });
  assert.notEqual(other.choices[0]!.text, ref.text, 'another seed gives another text');
});

test('a chat completion runs the chat template and matches generate, streamed or not', async () => {
  const ref = reference(chatPrompt('hello agents'), { seed: 5, maxTokens: 16, temperature: 1, topP: 0.9 });
  const body = {
    model: 'tiny',
    messages: [{ role: 'user' as const, content: 'hello agents' }],
    max_tokens: 16,
    top_p: 0.9,
    seed: 5,
  };
  const a = await client.chat.completions.create(body);
  assert.equal(a.choices[0]!.message.content, ref.text);
  assert.equal(a.usage!.prompt_tokens, chatPrompt('hello agents').length);
  let streamed = '';
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
    streamed += chunk.choices[0]?.delta.content ?? '';
  assert.equal(streamed, ref.text);
});

test('a stop string cuts the text before it', async () => {
  const body = { model: 'tiny', prompt: 'hello world', max_tokens: 24, temperature: 0, seed: 1 };
  const full = (await client.completions.create(body)).choices[0]!.text;
  const stop = full.slice(5, 7);
  const cut = await client.completions.create({ ...body, stop: [stop] });
  assert.equal(cut.choices[0]!.text, full.slice(0, full.indexOf(stop)));
  assert.equal(cut.choices[0]!.finish_reason, 'stop');
});

test('a streamed stop string never shows: the text before it streams as the unstreamed completion has it', async () => {
  // A stop string across a token boundary: its first character arrives a token before it is complete, so a stream
  // that sent every token's text at once would already have shown that character when the stop string appears.
  const prompt = 'hello world';
  const { ids } = reference(agent.tokenizer.encode(prompt), { seed: 1, maxTokens: 24, temperature: 0 });
  const upTo = (n: number): string => agent.tokenizer.decode(ids.slice(0, n), { skipSpecialTokens: true });
  let stop = '';
  for (let n = 1; n < ids.length && stop === ''; n++) {
    const [before, after] = [upTo(n), upTo(n + 1)];
    const candidate = before.slice(-1) + after.slice(before.length, before.length + 1);
    if (/^[ -~]{2}$/.test(candidate) && after.startsWith(before) && after.indexOf(candidate) === before.length - 1)
      stop = candidate;
  }
  assert.notEqual(stop, '', `no stop string across a token boundary in ${JSON.stringify(upTo(ids.length))}`);
  const body = { model: 'tiny', prompt, max_tokens: 24, temperature: 0, seed: 1, stop: [stop] };
  const cut = (await client.completions.create(body)).choices[0]!;
  assert.equal(cut.text, upTo(ids.length).slice(0, upTo(ids.length).indexOf(stop)));
  let streamed = '';
  let finish: string | null = null;
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(streamed, cut.text, `stop ${JSON.stringify(stop)}`);
  assert.equal(finish, 'stop');
});

test('TextStream holds back what may start a stop string or end inside a character, and lets it go once it cannot', () => {
  const tok = new CharTokenizer({
    alphabet: 'abcdefghijklmnopqrstuvwxyz ',
    specialTokens: ['<eos>'],
    names: { eos: '<eos>' },
  });
  /** The text shown after each token of `text` under `stops`, then at the end. */
  const shown = (text: string, stops: string[]) => {
    const stream = new TextStream(tok, stops);
    const out: string[] = [];
    let sent = '';
    for (const id of tok.encode(text)) if (!stream.stopped) out.push((sent += stream.push(id)));
    out.push((sent += stream.finish()));
    return { out, stopped: stream.stopped };
  };
  // The stop string completes: nothing of it was ever shown, and what was shown was never taken back.
  const stopped = shown('hello world', ['wor']);
  assert.equal(stopped.stopped, true);
  assert.deepEqual(stopped.out, ['h', 'he', 'hel', 'hell', 'hello', 'hello ', 'hello ', 'hello ', 'hello ', 'hello ']);
  // Held back while it could start a stop string (the "o" of "hello" and "or" of "world" for "or ", "w" and "wo" for
  // "wox"), let go as soon as it cannot.
  const through = shown('hello world', ['wox', 'or ']);
  assert.equal(through.stopped, false);
  assert.deepEqual(through.out, [
    ...['h', 'he', 'hel', 'hell', 'hell', 'hello ', 'hello ', 'hello '],
    ...['hello w', 'hello worl', 'hello world', 'hello world'],
  ]);
  // A byte-level token that ends inside a UTF-8 character shows nothing until the character is whole.
  const bytes = agent.tokenizer.encode('é!');
  const utf8 = new TextStream(agent.tokenizer, []);
  const pieces = bytes.map((id) => utf8.push(id));
  assert.ok(bytes.length >= 2 && pieces[0] === '', `${bytes.length} tokens: ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join('') + utf8.finish(), 'é!');
});

test('top log-probs are log-softmax values of the logits: the most likely tokens, ≤ 0, and the sampled one as scored', async () => {
  const k = engine();
  const batcher = new Batcher(agent.model, k, 4);
  const prompt = agent.tokenizer.encode('the answer is');
  const steps: SampledToken[] = [];
  const request = { prompt, maxTokens: 6, temperature: 1, topP: 1, seed: 3, stopTokens: new Set<number>() };
  await batcher.submit({ ...request, topLogprobs: 5, onToken: (t) => !steps.push(t) });
  await batcher.close();
  // Independently: one forward pass over the prompt and the sampled tokens, log-softmax in float64.
  const ids = [...prompt, ...steps.map((t) => t.id)];
  const vocab = agent.model.cfg.vocabSize;
  const hidden = agent.model.forward({ k, tape: null }, { ids: Int32Array.from(ids), batch: 1, seqLen: ids.length });
  const logits = agent.model.logits(k, hidden.data, ids.length);
  steps.forEach((t, i) => {
    const row = Array.from(logits.subarray((prompt.length - 1 + i) * vocab, (prompt.length + i) * vocab));
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0));
    const want = row.map((v, id) => ({ id, logProb: v - lse })).sort((a, b) => b.logProb - a.logProb);
    assert.deepEqual(
      t.top.map((a) => a.id),
      want.slice(0, 5).map((a) => a.id),
      `step ${i}: the five most likely`,
    );
    t.top.forEach((a, j) => near(a.logProb, want[j]!.logProb, 1e-4, `step ${i}, alternative ${j}`));
    near(t.logProb, row[t.id]! - lse, 1e-4, `step ${i}: the sampled token`);
  });
  // Over the server: greedy, so the chosen token is the first alternative, with the log-prob the token has.
  const chat = await client.chat.completions.create({
    model: 'tiny',
    messages: [{ role: 'user', content: 'hello agents' }],
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    top_logprobs: 3,
  });
  const content = chat.choices[0]!.logprobs!.content!;
  assert.equal(content.length, 6);
  for (const [i, c] of content.entries()) {
    assert.equal(c.top_logprobs.length, 3);
    assert.equal(c.top_logprobs[0]!.token, c.token, `token ${i}`);
    near(c.top_logprobs[0]!.logprob, c.logprob, 1e-6, `token ${i}: the chosen one's log-prob`);
    const values = c.top_logprobs.map((a) => a.logprob);
    assert.ok(
      values.every((v, j) => v <= 0 && (j === 0 || v <= values[j - 1]!)),
      `token ${i}: ${values}`,
    );
    assert.ok(values.reduce((a, v) => a + Math.exp(v), 0) <= 1 + 1e-6, `token ${i}: more than all the mass`);
  }
});

test('32 concurrent streams give the same text as one at a time', async () => {
  const bodies = Array.from({ length: 32 }, (_, i) => ({
    model: 'tiny',
    prompt: `${'hello world, '.repeat(1 + (i % 5))}${i}`,
    max_tokens: 8 + (i % 7) * 3,
    temperature: i % 4 === 0 ? 0 : 1,
    seed: 100 + i,
  }));
  const collect = async (b: (typeof bodies)[number]): Promise<string> => {
    let text = '';
    for await (const chunk of await client.completions.create({ ...b, stream: true }))
      text += chunk.choices[0]?.text ?? '';
    return text;
  };
  const alone: string[] = [];
  for (const b of bodies) alone.push(await collect(b));
  const together = await Promise.all(bodies.map(collect));
  assert.deepEqual(together, alone);
  bodies.forEach((b, i) =>
    assert.equal(alone[i], reference(agent.tokenizer.encode(b.prompt), { ...b, maxTokens: b.max_tokens }).text),
  );
});

test('bad requests get 4xx with a message, and the server goes on serving', async () => {
  const status = async (p: Promise<unknown>): Promise<[number, string]> => {
    try {
      await p;
    } catch (e) {
      if (e instanceof OpenAI.APIError) return [e.status!, e.message];
      throw e;
    }
    assert.fail('the request succeeded');
  };
  const [tooLong, tooLongMsg] = await status(
    client.completions.create({ model: 'tiny', prompt: 'hello world '.repeat(80), max_tokens: 4 }),
  );
  assert.equal(tooLong, 400);
  assert.match(tooLongMsg, /maximum context length is 128 tokens/);
  const [unknown, unknownMsg] = await status(client.completions.create({ model: 'nope', prompt: 'hi' }));
  assert.equal(unknown, 404);
  assert.match(unknownMsg, /'nope' does not exist/);
  const [negative, negativeMsg] = await status(
    client.completions.create({ model: 'tiny', prompt: 'hi', max_tokens: -1 }),
  );
  assert.equal(negative, 400);
  assert.match(negativeMsg, /max_tokens/);
  const json = { 'Content-Type': 'application/json' };
  const malformed = await fetch(`${baseURL}/completions`, { method: 'POST', headers: json, body: '{"model": "tiny",' });
  assert.equal(malformed.status, 400);
  assert.match(((await malformed.json()) as { error: { message: string } }).error.message, /not valid JSON/);
  const huge = await fetch(`${baseURL}/completions`, {
    method: 'POST',
    headers: json,
    body: `"${'x'.repeat(2 << 20)}"`,
  });
  assert.equal(huge.status, 413);
  const ok = await client.completions.create({ model: 'tiny', prompt: 'hi', max_tokens: 3, seed: 1 });
  assert.equal(ok.usage!.completion_tokens <= 3, true);
});

test('sequences joining and leaving a running batch get the tokens they get alone', async () => {
  const batcher = new Batcher(agent.model, engine(), 8);
  const prompts = ['hello', 'the answer is 42', 'a', 'hello world, hello agents', 'q'].map((t) =>
    agent.tokenizer.encode(t),
  );
  const runs = [];
  for (const [i, prompt] of prompts.entries()) {
    const ids: number[] = [];
    const o = { seed: 7 + i, maxTokens: 6 + 5 * i, temperature: 1, topP: i % 2 ? 0.8 : 1 };
    const stopTokens = new Set([agent.tokenizer.eosId]);
    const done = batcher.submit({ prompt, ...o, stopTokens, topLogprobs: 0, onToken: (t) => !ids.push(t.id) });
    runs.push({ prompt, o, ids, done });
    // A decode step or two runs before the next request arrives.
    for (let k = 0; k < 2; k++) await new Promise((r) => setImmediate(r));
  }
  // The later ones join while the first ones run, and the short ones leave while the long ones go on.
  for (const r of runs) await r.done;
  assert.ok(batcher.peakBatch >= 3, `at most ${batcher.peakBatch} sequences were decoded together`);
  for (const r of runs) assert.deepEqual(r.ids, reference(r.prompt, r.o).ids);
  await batcher.close();
});

test('identical prompts admitted together share one prefill and get the tokens they get alone', async () => {
  const model = agent.model;
  let prefills = 0;
  const forward = model.forward.bind(model);
  model.forward = (ctx, b, cache) => (prefills++, forward(ctx, b, cache));
  const batcher = new Batcher(model, engine(), 8);
  const prompts = ['the answer is 42', 'the answer is 42', 'hello', 'the answer is 42', 'the answer is 42'];
  const runs = prompts.map((text, i) => {
    const prompt = agent.tokenizer.encode(text);
    const ids: number[] = [];
    const o = { seed: 3 + i, maxTokens: 8, temperature: 1 };
    const stopTokens = new Set([agent.tokenizer.eosId]);
    const done = batcher.submit({ prompt, ...o, topP: 1, stopTokens, topLogprobs: 0, onToken: (t) => !ids.push(t.id) });
    return { prompt, o, ids, done };
  });
  try {
    for (const r of runs) await r.done;
    await batcher.close();
  } finally {
    delete (model as Partial<typeof model>).forward;
  }
  assert.ok(prefills < prompts.length, `${prefills} prefills for ${prompts.length} sequences`);
  for (const r of runs) assert.deepEqual(r.ids, reference(r.prompt, r.o).ids);
});

test('a sequence whose step fails ends with the error, and the batcher goes on', async () => {
  const batcher = new Batcher(agent.model, engine(), 4);
  const request = (onToken: () => boolean) => ({
    prompt: agent.tokenizer.encode('hello'),
    maxTokens: 4,
    temperature: 0,
    topP: 1,
    seed: 1,
    stopTokens: new Set<number>(),
    topLogprobs: 0,
    onToken,
  });
  await assert.rejects(
    batcher.submit(
      request(() => {
        throw new Error('client gone');
      }),
    ),
    /client gone/,
  );
  assert.equal(await batcher.submit(request(() => false)), 'length');
  await batcher.close();
});

test(
  'shutting down cancels every choice of a running stream at the next decode step, cleanly, and stops listening',
  { timeout: 60_000 },
  async (t) => {
    // The served model's decode step calls stop(0) once both choices are decoding, so the shutdown provably comes
    // while the stream is being generated (most of its 100 tokens still to come), on any machine. Fixed seeds keep
    // both choices off the stop token until well past that step.
    const served = await loadPretrained(dir);
    const server = await HacrlServer.start(new Map([['tiny', served]]), engine(), { port: 0 });
    const decodeStep = served.model.decodeStep.bind(served.model);
    const batches: number[] = [];
    let stopAt = -1;
    let stopped: Promise<void> | undefined;
    served.model.decodeStep = (k, ids, cache) => {
      batches.push(ids.length);
      if (ids.length === 2 && stopAt < 0) {
        stopAt = batches.length;
        stopped = server.stop(0);
      }
      return decodeStep(k, ids, cache);
    };
    const own = new OpenAI({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
    const prompt = ['hello', 'the answer is'];
    try {
      const stream = await own.completions.create(
        { model: 'tiny', prompt, max_tokens: 100, seed: 1, stream: true },
        { signal: t.signal },
      );
      const texts = prompt.map(() => '');
      await assert.rejects(async () => {
        for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
      }, /cancelled: .* shutting down/);
      // What each choice got before the stop is the start of what it gets alone.
      prompt.forEach((p, i) => {
        const alone = reference(agent.tokenizer.encode(p), { seed: 1 + i, maxTokens: 100, temperature: 1 }).text;
        assert.ok(alone.startsWith(texts[i]!), `choice ${i}: ${JSON.stringify(texts[i])}`);
      });
    } finally {
      // Even when an assertion failed, the server must not stay up: it would keep this file from ever exiting.
      await (stopped ?? server.stop(0));
    }
    assert.ok(stopAt > 0, 'the two choices were never decoded together');
    assert.equal(batches.length, stopAt, `decode steps of ${batches.join(', ')} ran; none should after the stop`);
    await assert.rejects(fetch(`${server.url}/models`));
  },
);

test('shutting down closes a request whose body is still arriving', { timeout: 60_000 }, async (t) => {
  const server = await HacrlServer.start(new Map([['tiny', agent]]), engine(), { port: 0 });
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  const closed = new Promise((r) => socket.once('close', r));
  // The server's own listener runs first: once this one runs, the request is being read.
  const reading = new Promise((r) => {
    server['http'].once('request', r);
    // Should the test time out, the client goes and the steps below end, so that the file can exit.
    t.signal.addEventListener('abort', () => r(socket.destroy()));
  });
  await new Promise((r) => socket.once('connect', r));
  const body = '{"model": "tiny", "prompt": "hello"}';
  // Headers announce the whole body, half of it is sent, and the client stalls.
  socket.write(
    `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body.slice(0, body.length >> 1)}`,
  );
  await reading;
  await server.stop(0);
  await closed;
  await assert.rejects(fetch(`${server.url}/models`));
});

test('SIGTERM stops the server cleanly', async () => {
  assert.equal(await stopServer(), 0);
});
