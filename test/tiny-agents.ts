// Whole tiny agent folders (model, byte-level BPE tokenizer with a ChatML template, generation defaults) of each
// family, for the tests of what runs on saved agents: the server and the GGUF export; and adapter folders on them.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { LoraAdapters } from '../src/model/lora.js';
import { adapt } from '../src/model/peft.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { trainBpeTokenizer } from '../src/tokenizer/bpe-trainer.js';
import { mulberry32, uniform } from './helpers.js';
import { CONFIGS, testModel } from './tiny-models.js';

/** ChatML, as Qwen's templates write it. */
export const CHATML =
  "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Ids of the tiny agents: 3 special tokens, 256 bytes and up to 61 merges. */
export const AGENT_VOCAB = 320;

const CORPUS = [
  'the answer is 42. the question is what it means.',
  'a small model answers small questions; the agent learns from rewards.',
  'hello world, hello agents. 12 + 30 = 42 and 7 * 6 = 42.',
];

/**
 * Saves the tiny `family` model (test/tiny-models.ts, vocabulary widened to AGENT_VOCAB) as an agent in `dir`; with
 * `padding` > 0 its embedding has that many rows past the tokenizer's ids (as Qwen2.5's), their head rows scaled
 * 1000× so that their logits dwarf the real ones.
 */
export async function saveTinyAgent(dir: string, family: 'llama' | 'qwen2' | 'qwen3' | 'gpt2', seed = 1, padding = 0) {
  const tokenizer = trainBpeTokenizer(CORPUS, {
    vocabSize: AGENT_VOCAB,
    minFrequency: 1,
    specialTokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
    names: { eos: '<|im_end|>' },
    chatTemplate: CHATML,
  });
  const model = testModel({ ...CONFIGS[family]!, vocab_size: AGENT_VOCAB + padding }, seed);
  const head = model.head.data;
  for (let i = AGENT_VOCAB * model.cfg.hidden; i < head.length; i++) head[i]! *= 1000;
  await savePretrained(dir, { model, tokenizer, generation: null });
}

/**
 * Saves in `dir` a PEFT adapter folder (rank 4, alpha 8, every linear projection) on the agent folder `base`, with
 * random B (a fresh B is zero: the adapted model would answer as its base); no tokenizer files of its own with
 * `ownTokenizer` false (it then uses its base's).
 */
export async function saveTinyAdapter(dir: string, base: string, seed: number, ownTokenizer = true): Promise<void> {
  const agent = await loadPretrained(base);
  const adapters = LoraAdapters.init(
    agent.model.cfg,
    { rank: 4, alpha: 8, dropout: 0, targets: 'all-linear' },
    base,
    seed,
  );
  for (const [name, t] of adapters.params)
    if (name.includes('lora_B')) t.data.set(uniform(t.size, mulberry32(seed + t.size), -0.3, 0.3));
  await savePretrained(dir, { ...agent, model: adapt(agent.model, adapters) });
  if (!ownTokenizer) await rm(join(dir, 'tokenizer.json'));
}
