import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { scoreResponses } from '../model/response-log-probs.js';
import { loadPretrainedModel, tokenizerFolder } from '../model/pretrained.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Transformer } from '../model/transformer.js';
import type { Precision } from '../tensor/bf16.js';
import { checkIds, type Tokenizer } from '../tokenizer/tokenizer.js';
import { checkWritableFile } from '../util/fs-errors.js';
import { readJsonl, writeJsonl } from '../util/jsonl.js';
import { checkPrecisionRuns } from './precision.js';

const ids = z.array(z.number().int().nonnegative());
/** A row to score: text (tokenized with the model folder's tokenizer) or token ids. */
const ScoreRow = z.union([
  z.object({ prompt_ids: ids.min(1, 'prompt_ids needs at least one token'), response_ids: ids }),
  z.object({ prompt: z.string().min(1, 'prompt must not be empty'), response: z.string() }),
]);
type ScoreRow = z.output<typeof ScoreRow>;

/** Options of `hacrl score`. */
export interface ScoreOptions {
  /**
   * Checkpoint folder (config.json, weights, tokenizer files) or PEFT adapter folder, loaded as `hacrl eval` and
   * `hacrl serve` load it; without tokenizer files when every row is token ids.
   */
  model: string;
  /** JSONL rows: {prompt, response} text or {prompt_ids, response_ids}. */
  input: string;
  /** Output JSONL path; default: standard output. */
  output?: string;
  /** Sequences per forward pass; default 16. */
  batchSize: number;
  /** Let the tokenizer add its special tokens (e.g. a BOS) to the prompt; default false. */
  addSpecialTokens: boolean;
  /** Precision of the model's products, as a training agent's (src/cli/precision.ts); default fp32. */
  precision: Precision;
}

/** The row's token ids: its own, or its text encoded by `tok` (present whenever a row is text). */
function tokenize(
  row: ScoreRow,
  tok: Tokenizer | null,
  addSpecialTokens: boolean,
): { prompt: number[]; response: number[] } {
  if ('prompt_ids' in row) return { prompt: row.prompt_ids, response: row.response_ids };
  // Prompt and response are encoded apart so the response's tokens are exactly those the response alone encodes to.
  return { prompt: tok!.encode(row.prompt, { addSpecialTokens }), response: tok!.encode(row.response) };
}

/**
 * The model, with its tokenizer only when a row is text: rows of ids alone score under a folder without tokenizer
 * files. A text row under such a folder is refused before any weight is read. The model is loaded without the limit
 * to its tokenizer's ids that sampling and training apply (a padded embedding's extra rows): scores are the model's
 * own log-softmax over every row, as transformers computes them.
 */
async function loadForRows(
  o: ScoreOptions,
  rows: readonly ScoreRow[],
): Promise<{ model: Transformer; tokenizer: Tokenizer | null }> {
  const text = rows.findIndex((r) => 'prompt' in r);
  const folder = text < 0 ? null : await tokenizerFolder(o.model);
  if (text >= 0 && folder === null)
    throw new Error(
      `${o.input}: row ${text + 1} is text ({prompt, response}), which needs a tokenizer, and ${o.model} has none ` +
        '(no tokenizer.json or vocab.json): add the tokenizer files, or give every row as {prompt_ids, response_ids}',
    );
  return {
    model: await loadPretrainedModel(o.model, { precision: o.precision }),
    tokenizer: folder === null ? null : await loadTokenizer(folder),
  };
}

/**
 * `hacrl score`: per-token log-probs (nats, temperature 1) of each row's response given its prompt. Writes one JSON
 * object per input row: {token_logprobs, response_ids, sum_logprob}.
 */
export async function runScore(o: ScoreOptions): Promise<void> {
  checkPrecisionRuns(o.precision);
  if (o.output !== undefined) await checkWritableFile(o.output, '--output');
  const rows = await readJsonl(o.input, ScoreRow);
  const { model, tokenizer: tok } = await loadForRows(o, rows);
  const items = rows.map((r, i) => {
    const item = tokenize(r, tok, o.addSpecialTokens);
    try {
      checkIds([...item.prompt, ...item.response], model.cfg.vocabSize);
    } catch (e) {
      throw new Error(`${o.input}: row ${i + 1}: ${(e as Error).message}`);
    }
    return item;
  });
  const scores = scoreResponses(model, engine(), items, o.batchSize);
  const out = scores.map((lp, i) => ({
    token_logprobs: lp,
    response_ids: items[i]!.response,
    sum_logprob: lp.reduce((a, b) => a + b, 0),
  }));
  if (o.output) await writeJsonl(o.output, out);
  else for (const r of out) console.log(JSON.stringify(r));
}
