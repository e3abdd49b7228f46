#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { runScore } from './score.js';
import { runSmoke } from './smoke.js';

/** Parses a command-line value that must be a positive integer. */
function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

const program = new Command();
program
  .name('hacrl')
  .description('Heterogeneous agent collaborative RL (HACPO, AT-GRPO) for transformer language models on the CPU')
  .version('0.1.0');

program
  .command('smoke')
  .description('check the compute engine: backend, BLAS in use, kernel agreement with the TypeScript backend, speed')
  .option('--json', 'print one JSON object instead of text')
  .action((opts: { json?: boolean }) => runSmoke(opts.json === true));

program
  .command('score')
  .description('per-token log-probs of responses given prompts, under a checkpoint (JSONL in, JSONL out)')
  .requiredOption('--model <dir>', 'checkpoint folder (config.json, model.safetensors, tokenizer files)')
  .requiredOption('--input <file>', 'JSONL rows {prompt, response} (text) or {prompt_ids, response_ids}')
  .option('--output <file>', 'where to write the JSONL results (default: standard output)')
  .option('--batch-size <n>', 'sequences per forward pass', positiveInt, 16)
  .option('--add-special-tokens', 'let the tokenizer add its special tokens (e.g. BOS) to text prompts', false)
  .action((opts: { model: string; input: string; output?: string; batchSize: number; addSpecialTokens: boolean }) =>
    runScore(opts),
  );

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(`hacrl: ${(e as Error).message}`);
  process.exit(1);
});
