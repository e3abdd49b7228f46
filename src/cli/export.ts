// `hacrl export gguf`: a checkpoint folder as one GGUF file for llama.cpp.
import { Command, Option } from 'commander';
import { exportGguf } from '../export/gguf.js';
import type { GgufTensorType } from '../export/gguf-file.js';
import { BASE_HELP, readFolders } from '../model/pretrained.js';
import { checkOutput } from '../util/output-paths.js';

/** `hacrl export …` as a commander command. */
export function exportCommand(print: (line: string) => void = console.log): Command {
  const exp = new Command('export').description('write a checkpoint in the format of another runtime');
  exp
    .command('gguf')
    .description('one GGUF file for llama.cpp (Llama, Qwen2, Qwen3, GPT-2), tokenizer and chat template included')
    .requiredOption('--model <dir>', 'checkpoint folder (config.json, model.safetensors, tokenizer files)')
    .requiredOption('--out <file>', 'GGUF file to write (outside the checkpoint folders it reads)')
    .addOption(
      new Option(
        '--type <type>',
        "storage type of the matrices (norms and biases stay f32); default the checkpoint's own: bf16 for a BF16 " +
          'checkpoint (an adapter folder: its base), f32 otherwise',
      ).choices(['f32', 'f16', 'bf16']),
    )
    .option('--base <dir>', BASE_HELP)
    .option('--force', 'replace an existing --out file', false)
    .action(async (o: { model: string; out: string; type?: GgufTensorType; base?: string; force: boolean }) => {
      const read = await readFolders('--model', o.model, o.base);
      await checkOutput({ flag: '--out', path: o.out }, read, { force: o.force, folder: false });
      const s = await exportGguf(o.model, o.out, o.type, o.base);
      print(`${o.out}: ${s.architecture}, ${s.tensors} tensors (${s.type}), ${s.vocabulary} tokens`);
    });
  return exp;
}
