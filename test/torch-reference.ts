// Running the independent PyTorch implementation (test/torch/reference_model.py, Debian's python3-torch).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { readSafetensors } from '../src/model/safetensors.js';
import { TORCH_PYTHON } from '../bench/torch-python.js';

const SCRIPT = fileURLToPath(new URL('../../test/torch/reference_model.py', import.meta.url));

/** Fails, with how to fix it, when TORCH_PYTHON has no torch: CI installs it, and a skipped check proves nothing. */
export function requireTorch(): void {
  const r = spawnSync(TORCH_PYTHON, ['-c', 'import torch, numpy'], { encoding: 'utf8' });
  if (r.status !== 0)
    assert.fail(
      `the PyTorch reference needs ${TORCH_PYTHON} with torch and numpy: install the Debian package python3-torch ` +
        `(apt-get install python3-torch). ${r.error?.message ?? r.stderr}`,
    );
}

/**
 * Runs the reference on the checkpoint in `modelDir` (with the PEFT adapters of `adapterDir` when given) for `input`
 * ({ids, key_start?, targets, weights}, nested [B][T] arrays), writing it to `inputPath` and the result to
 * `outputPath`; returns `logits` and the gradients. `precision`: the script's --precision (default fp32).
 */
export async function runTorchReference(
  modelDir: string,
  input: Record<string, unknown>,
  inputPath: string,
  outputPath: string,
  adapterDir?: string,
  precision: 'fp32' | 'bf16' | 'autocast' = 'fp32',
): Promise<Map<string, { data: unknown }>> {
  await writeFile(inputPath, JSON.stringify(input));
  const args = [
    SCRIPT,
    `--precision=${precision}`,
    modelDir,
    inputPath,
    outputPath,
    ...(adapterDir ? [adapterDir] : []),
  ];
  const r = spawnSync(TORCH_PYTHON, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `reference_model.py failed: ${r.error?.message ?? r.stderr}`);
  return (await readSafetensors(outputPath)).tensors;
}
