// `hacrl lora merge`: a PEFT adapter folder merged into its base as a plain checkpoint folder.
import { Command } from 'commander';
import { adapterBase } from '../model/peft.js';
import { mergeAdapterFolder, modelFolders } from '../model/pretrained.js';
import { checkOutput } from '../util/output-paths.js';

/** `hacrl lora …` as a commander command. */
export function loraCommand(print: (line: string) => void = console.log): Command {
  const lora = new Command('lora').description('LoRA adapter folders (PEFT format)');
  lora
    .command('merge')
    .description('merge an adapter folder into its base: a plain Hugging Face checkpoint folder with the same logits')
    .requiredOption('--adapter <dir>', 'adapter folder (adapter_config.json, adapter_model.safetensors)')
    .requiredOption('--out <dir>', 'checkpoint folder to write (apart from the adapter and base folders)')
    .option('--base <dir>', "base checkpoint folder (default: the adapter's base_model_name_or_path)")
    .option('--force', 'replace an existing --out folder', false)
    .action(async (o: { adapter: string; out: string; base?: string; force: boolean }) => {
      const base = o.base ?? (await adapterBase(o.adapter));
      const bases = (await modelFolders(base)).map((path) => ({ flag: o.base ? '--base' : 'its base', path }));
      await checkOutput({ flag: '--out', path: o.out }, [{ flag: '--adapter', path: o.adapter }, ...bases], {
        force: o.force,
        folder: true,
      });
      const merged = await mergeAdapterFolder(o.adapter, o.out, o.base);
      print(`${o.out}: ${merged.model.cfg.family}, ${merged.model.numParameters} parameters (adapters merged)`);
    });
  return lora;
}
