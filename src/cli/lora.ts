// `hacrl lora merge`: a PEFT adapter folder merged into its base as a plain checkpoint folder.
import { Command, Option } from 'commander';
import { MERGE_DTYPES, mergeAdapterFolder, type MergeDtype } from '../model/merge.js';
import { BASE_HELP, readFolders } from '../model/pretrained.js';
import { checkOutput } from '../util/output-paths.js';

/** `hacrl lora …` as a commander command. */
export function loraCommand(print: (line: string) => void = console.log): Command {
  const lora = new Command('lora').description('LoRA adapter folders (PEFT format)');
  lora
    .command('merge')
    .description('merge an adapter folder into its base: a plain Hugging Face checkpoint folder with the same logits')
    .requiredOption('--adapter <dir>', 'adapter folder (adapter_config.json, adapter_model.safetensors)')
    .requiredOption('--out <dir>', 'checkpoint folder to write (apart from the adapter and base folders)')
    .option('--base <dir>', BASE_HELP)
    .addOption(
      new Option('--dtype <type>', "stored type of the weights (default: each tensor's type in the base)").choices(
        Object.keys(MERGE_DTYPES),
      ),
    )
    .option('--force', 'replace an existing --out folder', false)
    .action(async (o: { adapter: string; out: string; base?: string; dtype?: MergeDtype; force: boolean }) => {
      const read = await readFolders('--adapter', o.adapter, o.base);
      await checkOutput({ flag: '--out', path: o.out }, read, { force: o.force, folder: true });
      const s = await mergeAdapterFolder(o.adapter, o.out, { base: o.base, dtype: o.dtype });
      print(
        `${o.out}: ${s.family}, ${s.tensors} tensors (${s.dtypes.join(', ')}), adapters merged into ${s.merged} ` +
          `(base ${s.base})`,
      );
    });
  return lora;
}
