/**
 * llama.cpp's greedy decoding speed on hacrl's own weights, through node-llama-cpp's prebuilt CPU binaries (never
 * downloaded or built at run time): the checkpoint is exported to GGUF (f32, or bf16) with `hacrl export gguf`'s writer, and
 * decoded with the same prompts, thread count and batch. Batches of B sequences are B sequences of one context,
 * which node-llama-cpp decodes together in one llama_decode per step. The KV cache is f32, as hacrl's.
 */
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from 'node-llama-cpp';
import { writeAgentGguf } from '../src/export/gguf.js';
import type { GgufTensorType } from '../src/export/gguf-file.js';
import type { Transformer } from '../src/model/transformer.js';
import { trainBpeTokenizer } from '../src/tokenizer/bpe-trainer.js';

/** One decode case as llama.cpp ran it. */
export interface LlamaDecodeTiming {
  /** Seconds from the start until every sequence had its first new token (prefill). */
  prefillS: number;
  /** Seconds from then until every sequence had all its tokens. */
  decodeS: number;
  /** Greedy tokens [B][newTokens]. */
  tokens: number[][];
}

let llama: Llama | null = null;

/** llama.cpp's version and the CPU build node-llama-cpp loaded. */
export async function llamaCppInfo(): Promise<string> {
  llama ??= await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false });
  return `llama.cpp ${llama.llamaCppRelease.release} (node-llama-cpp's ${llama.buildType} CPU build)`;
}

/**
 * Writes `model` to `file` as a GGUF whose matrices are `type` (default f32); the tokenizer is a bare byte-level one
 * (the bench feeds token ids).
 */
export async function writeBenchGguf(model: Transformer, file: string, type: GgufTensorType = 'f32'): Promise<void> {
  const tokenizer = trainBpeTokenizer([], { vocabSize: 257, specialTokens: ['<|endoftext|>'] });
  await writeAgentGguf({ model, tokenizer, generation: null }, file, type, 'bench');
}

/** Loads a GGUF file for llamaCppDecode; dispose() it after. */
export async function loadLlamaModel(file: string): Promise<LlamaModel> {
  await llamaCppInfo();
  return llama!.loadModel({ modelPath: file });
}

/** Greedy decoding of `prompts` (one batch) for `newTokens` tokens each on `threads` threads. */
export async function llamaCppDecode(
  model: LlamaModel,
  prompts: readonly number[][],
  newTokens: number,
  threads: number,
): Promise<LlamaDecodeTiming> {
  const batch = prompts.length;
  const longest = Math.max(...prompts.map((p) => p.length));
  const context = await model.createContext({
    sequences: batch,
    contextSize: batch * (longest + newTokens + 8),
    batchSize: Math.max(512, batch * longest),
    threads,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  });
  try {
    let firstDone = 0;
    let prefillEnd = 0;
    const t0 = performance.now();
    const tokens = await Promise.all(
      prompts.map(async (prompt) => {
        const out: number[] = [];
        const seq = context.getSequence();
        for await (const t of seq.evaluate(prompt as Token[], { temperature: 0, yieldEogToken: true })) {
          out.push(t);
          if (out.length === 1 && ++firstDone === batch) prefillEnd = performance.now();
          if (out.length >= newTokens) break;
        }
        return out;
      }),
    );
    const end = performance.now();
    return { prefillS: (prefillEnd - t0) / 1e3, decodeS: (end - prefillEnd) / 1e3, tokens };
  } finally {
    await context.dispose();
  }
}

/** Releases llama.cpp. */
export async function closeLlamaCpp(): Promise<void> {
  await llama?.dispose();
  llama = null;
}
