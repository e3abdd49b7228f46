#!/usr/bin/env node
import { Command } from 'commander';
import { runSmoke } from './smoke.js';

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

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(`hacrl: ${(e as Error).message}`);
  process.exit(1);
});
