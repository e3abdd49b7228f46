// `--precision` of the commands that run a saved model (eval, score, serve, mas rollout). Each loads the folder with
// loadPretrained(dir, bases, { precision }), the call src/train/learners.ts loads an agent of that precision with
// (agents[].precision; src/tensor/bf16.ts): a whole model as fp32 masters rounded at each product, an adapter folder's
// base frozen (bfloat16 in memory at bf16) and shared by the adapter folders on it. A precision this machine cannot
// compute is refused before anything is read, as `hacrl train` refuses it.
import { Option } from 'commander';
import { bf16Refusal } from '../backend/cpu-features.js';
import { PRECISIONS, type Precision } from '../tensor/bf16.js';

/** The `--precision fp32|bf16` option, default fp32. */
export function precisionOption(): Option {
  return new Option(
    '--precision <p>',
    "precision of the model's products, as agents[].precision: bf16 rounds both operands to bfloat16 and " +
      'accumulates in fp32 (the native backend needs AMX-BF16 or AVX512_BF16)',
  )
    .choices(PRECISIONS)
    .default('fp32');
}

/**
 * Throws, naming the missing instruction sets and what to do, when `precision` is bf16 and `backend` (default the one
 * selected, HACRL_BACKEND) cannot compute it on a CPU with `flags` (default this one's).
 */
export function checkPrecisionRuns(precision: Precision, backend?: string, flags?: ReadonlySet<string>): void {
  const why = precision === 'bf16' ? bf16Refusal(backend, flags) : null;
  if (why) throw new Error(`--precision bf16: ${why}`);
}
