// `hacrl serve` against what a hostile page, a careless client or a failing request could do: the API key, the
// Content-Type a form post cannot send, bad escapes and fields, no server folders in errors, one request's failure
// kept to it, a client that never reads held to a bounded buffer, and every stream ended with [DONE] on SIGTERM.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { engine } from '../src/backend/engine.js';
import { generate } from '../src/model/generate.js';
import { loadPretrained, type Pretrained } from '../src/model/pretrained.js';
import { Batcher } from '../src/serve/batcher.js';
import { MAX_SEED } from '../src/serve/protocol.js';
import { HacrlServer } from '../src/serve/server.js';
import { startHacrlServe } from './cli.js';
import { CHATML, saveTinyAgent } from './tiny-agents.js';

const KEY = 'sk-test-1234';
const root = await mkdtemp(join(tmpdir(), 'hacrl-serve-guard-'));
const dir = join(root, 'agent');
/** The agent with a chat template that refuses system messages, as Llama 2's and Mistral's refuse some orders. */
const strictDir = join(root, 'strict');
let agent: Pretrained;
let server: HacrlServer;
const servers: HacrlServer[] = [];

before(async () => {
  await saveTinyAgent(dir, 'llama');
  agent = await loadPretrained(dir);
  await cp(dir, strictDir, { recursive: true });
  const config = join(strictDir, 'tokenizer_config.json');
  const json = JSON.parse(await readFile(config, 'utf8')) as Record<string, unknown>;
  json['chat_template'] =
    "{% if messages[0].role == 'system' %}{{ raise_exception('system messages are not supported') }}{% endif %}" +
    CHATML;
  await writeFile(config, JSON.stringify(json));
  const strict = await loadPretrained(strictDir);
  server = await start(
    new Map([
      ['tiny', agent],
      ['strict', strict],
    ]),
  );
});

after(async () => {
  for (const s of servers) await s.stop(0);
  await rm(root, { recursive: true, force: true });
});

/** A server over `models` on a free port, stopped when the file ends. */
async function start(models: Map<string, Pretrained>, o: { maxStreamBufferBytes?: number } = {}) {
  const s = await HacrlServer.start(models, engine(), { port: 0, ...o });
  servers.push(s);
  return s;
}

/** POSTs `body` as JSON (or with `headers`) to `path` and returns the status and the error message, if any. */
async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const json = (await r.json()) as { error?: { message: string; param: string | null; type: string } };
  return { status: r.status, error: json.error };
}

/** The events of a server-sent-event body, `data: ` taken off. */
const events = (text: string): string[] =>
  text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => e.replace(/^data: /, ''));

test('with --api-key the openai client is refused (401) without the key and answered with it', async () => {
  const { baseURL, stop } = await startHacrlServe(['--model', `tiny=${dir}`, '--port', '0', '--api-key', KEY]);
  try {
    const wrong = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError);
    const bare = await fetch(`${baseURL}/models`);
    assert.equal(bare.status, 401);
    const body = (await bare.json()) as { error: { type: string; code: string } };
    assert.deepEqual([body.error.type, body.error.code], ['invalid_request_error', 'invalid_api_key']);
    const right = new OpenAI({ baseURL, apiKey: KEY, maxRetries: 0 });
    const r = await right.completions.create({ model: 'tiny', prompt: 'hello', max_tokens: 3, seed: 1 });
    assert.ok(r.usage!.completion_tokens > 0);
  } finally {
    assert.equal(await stop(), 0);
  }
});

test('binding beyond loopback without a key prints a warning', async () => {
  const child = spawn(
    process.execPath,
    ['dist/src/cli/main.js', 'serve', '--model', dir, '--host', '0.0.0.0', '--port', '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, HACRL_API_KEY: '' },
    },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise((r) => child.once('close', r));
  await new Promise<void>((resolve) =>
    child.stdout.on('data', (d: Buffer) => d.toString().includes('http') && resolve()),
  );
  child.kill('SIGTERM');
  await exited;
  assert.match(stderr, /warning: 0\.0\.0\.0 is reachable from other machines and no --api-key/);
});

test('a body that is not sent as application/json is refused with 415, before it is read', async () => {
  const body = JSON.stringify({ model: 'tiny', prompt: 'hello', max_tokens: 2 });
  for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
    const r = await post(server.url, '/completions', body, { 'Content-Type': type });
    assert.equal(r.status, 415, type);
    assert.match(r.error!.message, /Content-Type: application\/json/);
  }
  const ok = await post(server.url, '/completions', body, { 'Content-Type': 'application/json; charset=utf-8' });
  assert.equal(ok.status, 200);
});

test('a malformed escape in the URL is a 400, not a 500', async () => {
  const r = await fetch(`${server.url}/models/%ZZ`);
  assert.equal(r.status, 400);
  assert.match(((await r.json()) as { error: { message: string } }).error.message, /malformed percent escape/);
});

test("an error from the model's own files names no folder of the server", async () => {
  const r = await post(server.url, '/chat/completions', {
    model: 'strict',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ],
  });
  assert.equal(r.status, 400);
  assert.match(r.error!.message, /system messages are not supported/);
  assert.ok(!r.error!.message.includes(root), r.error!.message);
  assert.doesNotMatch(r.error!.message, /\/tmp\//);
});

test('a seed outside 0 to 2^32 − 1 is refused, as is one whose later choices would pass it; suffix is refused', async () => {
  const ask = (more: Record<string, unknown>) =>
    post(server.url, '/completions', { model: 'tiny', prompt: 'hi', max_tokens: 2, ...more });
  for (const seed of [-1, MAX_SEED + 1, 2 ** 53, 1.5]) {
    const r = await ask({ seed });
    assert.equal(r.status, 400, String(seed));
    assert.equal(r.error!.param, 'seed');
  }
  assert.equal((await ask({ seed: MAX_SEED })).status, 200);
  const choices = await ask({ seed: MAX_SEED, prompt: ['a', 'b'] });
  assert.equal(choices.status, 400);
  assert.match(choices.error!.message, /seed \+ 1 must be at most 4294967295/);
  const suffix = await ask({ suffix: ' the end' });
  assert.equal(suffix.status, 400);
  assert.equal(suffix.error!.param, 'suffix');
});

test('a request whose sampling fails gets its error; a stream running beside it goes on to [DONE]', async () => {
  // Non-finite logits for one prompt only, as an adapter with non-finite weights gives: top-p cannot sample them.
  const served = await loadPretrained(dir);
  const bad = served.tokenizer.encode('the question').join();
  const forward = served.model.forward.bind(served.model);
  const logits = served.model.logits.bind(served.model);
  let poisoned = false;
  let runningBeside = 0;
  served.model.forward = (ctx, b, cache) => {
    poisoned = Array.from(b.ids).join() === bad;
    return forward(ctx, b, cache);
  };
  served.model.logits = (k, hidden, rows, out) => {
    const l = logits(k, hidden, rows, out);
    if (poisoned) {
      l.fill(NaN);
      runningBeside = batcher.load;
    }
    poisoned = false;
    return l;
  };
  // A slower step keeps the stream running well past the failing request's arrival on any machine.
  const decodeStep = served.model.decodeStep.bind(served.model);
  served.model.decodeStep = (k, ids, cache) => {
    const until = performance.now() + 2;
    while (performance.now() < until);
    return decodeStep(k, ids, cache);
  };
  const s = await start(new Map([['tiny', served]]));
  const batcher = (s['models'] as Map<string, { batcher: Batcher }>).get('tiny')!.batcher;
  const client = new OpenAI({ baseURL: s.url, apiKey: 'unused', maxRetries: 0 });
  const stream = await client.completions.create({
    model: 'tiny',
    prompt: 'hello',
    max_tokens: 100,
    seed: 3,
    temperature: 1,
    stream: true,
  });
  let text = '';
  let finish: string | null = null;
  let failed: Promise<unknown> | undefined;
  for await (const chunk of stream) {
    // Once the stream runs, the failing request comes.
    failed ??= client.completions.create({ model: 'tiny', prompt: 'the question', max_tokens: 5, top_p: 0.5 }).then(
      () => assert.fail('the request succeeded'),
      (e: unknown) => e,
    );
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  const e = await failed;
  assert.ok(e instanceof OpenAI.InternalServerError && /not finite/.test(e.message), String(e));
  assert.equal(runningBeside, 1, 'the stream was running when the other request failed');
  assert.ok(finish === 'length' || finish === 'stop');
  const [g] = generate(agent.model, engine(), [agent.tokenizer.encode('hello')], {
    seed: 3,
    maxNewTokens: 100,
    temperature: 1,
    stopTokens: [agent.tokenizer.eosId],
  });
  assert.equal(text, agent.tokenizer.decode(g!.ids, { skipSpecialTokens: true }));
});

test('a sequence whose onToken throws ends alone; the one decoded beside it gets its own tokens', async () => {
  const batcher = new Batcher(agent.model, engine(), 4);
  const prompt = agent.tokenizer.encode('hello');
  const o = { prompt, maxTokens: 30, temperature: 1, topP: 1, seed: 5, stopTokens: new Set<number>(), topLogprobs: 0 };
  const ids: number[] = [];
  const good = batcher.submit({ ...o, onToken: (t) => !ids.push(t.id) });
  let n = 0;
  const failing = batcher.submit({
    ...o,
    seed: 6,
    onToken: () => {
      if (++n === 3) throw new Error('client gone');
      return false;
    },
  });
  await assert.rejects(failing, /client gone/);
  assert.equal(await good, 'length');
  const [g] = generate(agent.model, engine(), [prompt], { seed: 5, maxNewTokens: 30, temperature: 1, stopTokens: [] });
  assert.deepEqual(ids, g!.ids);
  await batcher.close();
});

test('a stream client that reads nothing holds at most --max-stream-buffer-bytes, then is dropped', async () => {
  const limit = 2048;
  const s = await start(new Map([['tiny', agent]]), { maxStreamBufferBytes: limit });
  let peak = 0;
  let largestEvent = 0;
  let response: ServerResponse | undefined;
  // The server's own listener runs first; corking the socket keeps every byte in the server, as a full socket does.
  s['http'].once('request', (_req, res: ServerResponse) => {
    response = res;
    res.socket!.cork();
    const write = res.write.bind(res) as (chunk: string) => boolean;
    res.write = ((chunk: string) => {
      largestEvent = Math.max(largestEvent, Buffer.byteLength(chunk));
      const ok = write(chunk);
      peak = Math.max(peak, res.writableLength);
      return ok;
    }) as typeof res.write;
  });
  const body = { model: 'tiny', prompt: 'hello', max_tokens: 100, logprobs: 5, seed: 1, stream: true };
  // Even the headers stay in the server, so the client sees the connection close.
  await assert.rejects(
    fetch(`${s.url}/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
  assert.ok(response?.destroyed, 'the client was dropped');
  assert.ok(peak > 0 && peak <= limit + largestEvent, `${peak} bytes were buffered (limit ${limit})`);
  // Its sequence was cancelled, not decoded on for nobody.
  const batcher = (s['models'] as Map<string, { batcher: Batcher }>).get('tiny')!.batcher;
  while (batcher.load > 0) await new Promise((r) => setImmediate(r));
});

/** Opens `n` streamed completions of 100 tokens at `baseURL`; resolves once each has its first event. */
function openStreams(baseURL: string, n: number): Promise<Response[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) =>
      fetch(`${baseURL}/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', prompt: `hello ${i}`, max_tokens: 100, seed: i, stream: true }),
      }),
    ),
  );
}

/** Asserts that every stream ended with a finished choice or the shutdown's error, then [DONE]; returns how many were cut. */
async function checkEnds(streams: Response[], what: string): Promise<number> {
  let cut = 0;
  for (const [i, r] of streams.entries()) {
    const text = await r.text();
    const e = events(text);
    assert.equal(e.at(-1), '[DONE]', `${what}, stream ${i}: ${text.slice(-200)}`);
    const last = JSON.parse(e.at(-2)!) as { error?: { message: string }; choices?: { finish_reason: string }[] };
    if (last.error) {
      assert.match(last.error.message, /shutting down/);
      cut++;
    } else assert.ok(last.choices![0]!.finish_reason, `${what}, stream ${i}: ${e.at(-2)}`);
  }
  return cut;
}

test('shutting down ends every open stream with a last event and [DONE], every time; so does SIGTERM', async () => {
  let cut = 0;
  for (let round = 0; round < 4; round++) {
    const s = await HacrlServer.start(new Map([['tiny', agent]]), engine(), { port: 0 });
    const streams = await openStreams(s.url, 8);
    await s.stop(0);
    cut += await checkEnds(streams, `round ${round}`);
  }
  const { baseURL, stop } = await startHacrlServe([
    '--model',
    `tiny=${dir}`,
    '--port',
    '0',
    '--shutdown-grace-ms',
    '0',
  ]);
  const streams = await openStreams(baseURL, 8);
  assert.equal(await stop(), 0);
  const signalled = await checkEnds(streams, 'SIGTERM');
  assert.ok(cut > 0 && signalled > 0, 'no stream was still running at the shutdown');
});
