/**
 * A machine's fingerprint of a run: the hashes of what the config names but does not hold — the training problems
 * as this machine loads them, and each starting checkpoint's files. Two machines given the same config file can
 * still hold different data behind a relative path, or other weights under the same folder name; comparing
 * fingerprints before the first step refuses that before any work (exchange.ts).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { ResolvedRun } from '../train/resolved-run.js';

/**
 * The files of a checkpoint folder that make its model: configs, weights, tokenizer and template files. Other files
 * (a README, logs) may differ between machines without changing what is trained.
 */
const MODEL_FILE = /\.(json|safetensors|txt|model|jinja)$/;

/** sha256 of a checkpoint folder's model files (names and contents, in name order), streamed. */
async function folderHash(dir: string): Promise<string> {
  const hash = createHash('sha256');
  const names = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isFile() && MODEL_FILE.test(e.name) && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort();
  for (const name of names) {
    hash.update(`${name}\0`);
    for await (const chunk of createReadStream(join(dir, name))) hash.update(chunk as Buffer);
    hash.update('\0');
  }
  return hash.digest('hex');
}

/**
 * The fingerprint of `run` on this machine: `data.train` (the training problems as loaded, so generated sets and
 * files alike) and `checkpoint of NAME` per agent, each a sha256 in hex.
 */
export async function runFingerprint(run: Pick<ResolvedRun, 'source' | 'agents'>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  if (run.source.kind === 'rollout') {
    const problems = (await loadDataSpec(run.source.train)).problems;
    out['data.train'] = createHash('sha256').update(JSON.stringify(problems)).digest('hex');
  }
  for (const a of run.agents) out[`checkpoint of ${a.name}`] = await folderHash(a.checkpoint);
  return out;
}
