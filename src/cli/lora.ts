// `hacrl lora merge`: a PEFT adapter folder merged into its base as a plain checkpoint folder.
import { Command } from 'commander';
import { mergeAdapterFolder } from '../model/pretrained.js';

/** `hacrl lora …` as a commander command. */
export function loraCommand(print: (line: string) => void = console.log): Command {
  const lora = new Command('lora').description('LoRA adapter folders (PEFT format)');
  lora
    .command('merge')
    .description('merge an adapter folder into its base: a plain Hugging Face checkpoint folder with the same logits')
    .requiredOption('--adapter <dir>', 'adapter folder (adapter_config.json, adapter_model.safetensors)')
    .requiredOption('--out <dir>', 'checkpoint folder to write')
    .option('--base <dir>', "base checkpoint folder (default: the adapter's base_model_name_or_path)")
    .action(async (o: { adapter: string; out: string; base?: string }) => {
      const merged = await mergeAdapterFolder(o.adapter, o.out, o.base);
      print(`${o.out}: ${merged.model.cfg.family}, ${merged.model.numParameters} parameters (adapters merged)`);
    });
  return lora;
}
