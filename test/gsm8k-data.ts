// Where the tests find GSM8K: ../shared/data/gsm8k beside the repository, never a copy in it (shared/README.md).
// When it is absent the tests that need it skip with this reason, which names the missing file.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The GSM8K folder: <repository>/../shared/data/gsm8k (this file runs from dist/test/). */
export const GSM8K_DIR = join(fileURLToPath(new URL('../../', import.meta.url)), '../shared/data/gsm8k');

/** Path of one split's JSONL file. */
export const gsm8kFile = (split: 'train' | 'test'): string => join(GSM8K_DIR, `${split}.jsonl`);

/** `skip` option of a test that reads `split`: false when the file is here, else the reason shown in the output. */
export function gsm8kSkip(split: 'train' | 'test'): string | false {
  return existsSync(gsm8kFile(split)) ? false : `GSM8K not found: ${gsm8kFile(split)} (see ../shared/README.md)`;
}
