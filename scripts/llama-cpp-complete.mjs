// Greedy completion of a prompt by llama.cpp (node-llama-cpp's prebuilt CPU binaries; never downloaded or built) on a
// GGUF file, for scripts/trial-real-models.sh. A file rather than `node -e`: node-llama-cpp tests its binary in a
// child process that inherits the parent's flags, and `-e` would run there again.
// Usage: node scripts/llama-cpp-complete.mjs FILE.gguf PROMPT [MAX_TOKENS (default 8)]
import { getLlama, LlamaCompletion, LlamaLogLevel } from 'node-llama-cpp';

const [file, prompt, maxTokens = '8'] = process.argv.slice(2);
if (!file || prompt === undefined)
  throw new Error('usage: node scripts/llama-cpp-complete.mjs FILE.gguf PROMPT [MAX_TOKENS]');
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false });
const model = await llama.loadModel({ modelPath: file });
const context = await model.createContext({ contextSize: 256 });
const text = await new LlamaCompletion({ contextSequence: context.getSequence() }).generateCompletion(prompt, {
  maxTokens: Number(maxTokens),
  temperature: 0,
});
console.log(`llama.cpp ${llama.llamaCppRelease.release}: ${JSON.stringify(text)}`);
await llama.dispose();
