/**
 * `npm run bench:serve [-- --json] [-- --quick]`: throughput of `hacrl serve` (a child process, loopback) with 1, 8
 * and 32 concurrent streamed completions against the same requests sent one at a time, on bench:model's 10M
 * Qwen3-style model (random weights; greedy, prompt 32 tokens, 64 new tokens, token-id prompts). Continuous batching
 * should make N concurrent streams several times faster in total than N sequential ones; `generate()` at batch 1 in
 * this process is the server-free reference for one stream. Needs a quiet machine; with --json the last line is one
 * JSON object.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine } from '../src/backend/engine.js';
import { generate } from '../src/model/generate.js';
import { parseHfConfig } from '../src/model/hf-config.js';
import { savePretrained } from '../src/model/pretrained.js';
import { initModel } from '../src/model/weights.js';
import { trainBpeTokenizer } from '../src/tokenizer/bpe-trainer.js';
import { backgroundCores, cpuTicks } from '../src/util/cpu-load.js';
import { Rng } from '../src/util/rng.js';

const args = new Set(process.argv.slice(2));
const json = args.has('--json');
const quick = args.has('--quick');
const log = (s: string): void => {
  if (!json) console.log(s);
};

/** Concurrent streams measured, each against the same requests sent one at a time. */
const CONCURRENCY = quick ? [1, 8] : [1, 8, 32];
const PROMPT_LEN = 32;
const NEW_TOKENS = quick ? 16 : 64;
const SEED = 1234;

/** bench:model's 10M shape. */
const CONFIG = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  vocab_size: 8192,
  hidden_size: 320,
  num_hidden_layers: 6,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  intermediate_size: 960,
  max_position_embeddings: 512,
  rope_theta: 1e6,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  hidden_act: 'silu',
};

/** Starts `hacrl serve` on a free loopback port; resolves with its base URL once it listens. */
function startServer(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    ['dist/src/cli/main.js', 'serve', '--model', `bench=${dir}`, '--port', '0', '--max-batch', '32'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /at (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m) resolve({ url: m[1]!, child });
    });
    child.once('exit', (code) => reject(new Error(`hacrl serve exited (${code}) before listening`)));
  });
}

/** One streamed completion: its completion tokens and seconds to the first piece and to the end. */
async function stream(url: string, prompt: number[]): Promise<{ tokens: number; firstS: number; totalS: number }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      model: 'bench',
      prompt,
      max_tokens: NEW_TOKENS,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.ok || !res.body) throw new Error(`the server answered ${res.status}: ${await res.text()}`);
  let firstS = 0;
  let tokens = 0;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    if (firstS === 0) firstS = (performance.now() - t0) / 1e3;
    buffered += decoder.decode(chunk, { stream: true });
    const events = buffered.split('\n\n');
    buffered = events.pop()!;
    for (const e of events) {
      const data = e.replace(/^data: /, '');
      if (data === '[DONE]') continue;
      const usage = (JSON.parse(data) as { usage?: { completion_tokens: number } }).usage;
      if (usage) tokens = usage.completion_tokens;
    }
  }
  return { tokens, firstS, totalS: (performance.now() - t0) / 1e3 };
}

interface Row {
  streams: number;
  /** Tokens/s of all streams together when sent at once. */
  concurrent_tokens_per_s: number;
  /** Tokens/s of the same requests sent one at a time. */
  sequential_tokens_per_s: number;
  speedup: number;
  /** Mean seconds to the first streamed piece, concurrent run. */
  concurrent_first_piece_s: number;
  background_cores: number | null;
}

const round = (x: number, d = 1): number => Number(x.toFixed(d));

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bench-serve-'));
  const model = initModel(parseHfConfig(CONFIG), SEED);
  const tokenizer = trainBpeTokenizer([], { vocabSize: 257, specialTokens: ['<|endoftext|>'] });
  await savePretrained(dir, { model, tokenizer, generation: null });
  const rng = new Rng(SEED + 1);
  const prompts = Array.from({ length: Math.max(...CONCURRENCY) }, () =>
    Array.from({ length: PROMPT_LEN }, () => 1 + Math.floor(rng.next() * (CONFIG.vocab_size - 1))),
  );
  log(`hacrl serve benchmark — ${cpus()[0]?.model ?? 'cpu'}, HACRL_THREADS=${process.env.HACRL_THREADS ?? 'unset'}`);
  log(
    `10M Qwen3-style model, random weights; greedy, prompt ${PROMPT_LEN} token ids, up to ${NEW_TOKENS} new tokens ` +
      `(fewer when the model emits its eos); tokens/s = completion tokens / wall time, client included`,
  );
  // generate() at batch 1 without a server: what one stream costs at best.
  const k = engine();
  generate(model, k, [prompts[0]!], { temperature: 0, maxNewTokens: 4 });
  const g0 = performance.now();
  const [g] = generate(model, k, [prompts[0]!], { temperature: 0, maxNewTokens: NEW_TOKENS, stopTokens: [0] });
  const generateTps = g!.ids.length / ((performance.now() - g0) / 1e3);
  log(`generate() batch 1, no server: ${round(generateTps)} tokens/s (prefill included)`);

  const { url, child } = await startServer(dir);
  const rows: Row[] = [];
  try {
    await stream(url, prompts[0]!); // warm-up: the server's first request builds its inference weights' caches
    for (const n of CONCURRENCY) {
      const before = cpuTicks([child.pid!]);
      const s0 = performance.now();
      let seqTokens = 0;
      for (const p of prompts.slice(0, n)) seqTokens += (await stream(url, p)).tokens;
      const seqS = (performance.now() - s0) / 1e3;
      const c0 = performance.now();
      const together = await Promise.all(prompts.slice(0, n).map((p) => stream(url, p)));
      const conS = (performance.now() - c0) / 1e3;
      const conTokens = together.reduce((a, r) => a + r.tokens, 0);
      if (conTokens !== seqTokens) throw new Error(`${conTokens} tokens concurrently, ${seqTokens} one at a time`);
      const row: Row = {
        streams: n,
        concurrent_tokens_per_s: round(conTokens / conS),
        sequential_tokens_per_s: round(seqTokens / seqS),
        speedup: round(seqS / conS, 2),
        concurrent_first_piece_s: round(together.reduce((a, r) => a + r.firstS, 0) / n, 3),
        background_cores: backgroundCores(before, cpuTicks([child.pid!])),
      };
      rows.push(row);
      log(
        `  ${String(n).padStart(2)} streams: ${row.concurrent_tokens_per_s} tokens/s together, ` +
          `${row.sequential_tokens_per_s} one at a time (${row.speedup}×); first piece after ` +
          `${row.concurrent_first_piece_s} s on average`,
      );
      if ((row.background_cores ?? 0) > 0.1)
        log(`  WARNING: other processes kept ${row.background_cores} cores busy: rerun on an idle machine`);
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(dir, { recursive: true, force: true });
  }
  if (json)
    console.log(
      JSON.stringify({
        cpu: cpus()[0]?.model ?? 'unknown',
        hacrl_threads: process.env.HACRL_THREADS ?? null,
        prompt_len: PROMPT_LEN,
        new_tokens: NEW_TOKENS,
        generate_batch1_tokens_per_s: round(generateTps),
        rows,
      }),
    );
}

await main();
