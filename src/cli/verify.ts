import { z } from 'zod';
import { EXTRACTOR_NAMES, extractAnswerWith, type ExtractOptions } from '../rewards/extract.js';
import { verifyMany, type CheckResult, type VerifyStats } from '../rewards/math-equal.js';
import { SymbolicPool } from '../rewards/worker-pool.js';
import { checkWritableFile } from '../util/fs-errors.js';
import { readJsonl, writeJsonl } from '../util/jsonl.js';

const text = z.union([z.string(), z.number().transform(String)]);
const nullable = z.union([text, z.null().transform(() => '')]);
/**
 * A row to check: the gold (bare, `#### 18` or with `\boxed{}`) and the model's response as `answer` (or
 * `response`), from which the answer is extracted unless `--extracted` says it already is.
 */
const VerifyRow = z.union([
  z.object({ gold: text, answer: nullable }),
  z.object({ gold: text, response: nullable }).transform((r) => ({ gold: r.gold, answer: r.response })),
]);

/** Options of `hacrl verify`. */
export interface VerifyCliOptions {
  /** One gold answer (with `answer`); prints true or false. */
  gold?: string;
  /** One response (or, with `extracted`, answer) to check against `gold`. */
  answer?: string;
  /** JSONL rows {gold, answer} (or {gold, response}); writes {equal, reason, extracted} per row. */
  input?: string;
  /** Output JSONL path for `input`; default: standard output. */
  output?: string;
  /** Time limit of each whole check in milliseconds (1 to 2^31 − 1); default 2000. */
  timeoutMs: number;
  /**
   * Extractors tried on each response, in their fixed order (boxed, hashes, answerIs, lastNumber, whole); default
   * boxed, hashes, answerIs (FULL_RESPONSE_EXTRACT).
   */
  extract?: string[];
  /** The answers are already extracted: each is read whole; default false. */
  extracted?: boolean;
}

/** Exit status for a gold that cannot be parsed (one-pair form). */
const EXIT_UNPARSEABLE_GOLD = 2;
/** Exit status for a check with no verdict (time-out, size limits or worker failure; one-pair form). */
const EXIT_NO_VERDICT = 3;

/** Default extractors of `hacrl verify`, as command-line names. */
export const DEFAULT_VERIFY_EXTRACT = ['boxed', 'hashes', 'answerIs'];

function summary(s: VerifyStats): string {
  return (
    `verify: checked ${s.checked}, equal ${s.equal}, not equal ${s.notEqual}, timeouts ${s.timeouts}, ` +
    `unparseable golds ${s.unparseableGold}, too long ${s.tooLong}, too deep ${s.tooDeep}, other ${s.other} ` +
    `(symbolic ${s.symbolic})`
  );
}

function describe(r: CheckResult): string {
  return r.detail ? `${r.reason}: ${r.detail}` : r.reason;
}

/** The extractor switches the options ask for; unknown names are an error that lists the known ones. */
export function extractOptions(o: Pick<VerifyCliOptions, 'extract' | 'extracted'>): ExtractOptions {
  if (o.extracted) return { boxed: false, whole: true };
  const names = o.extract ?? DEFAULT_VERIFY_EXTRACT;
  const out: ExtractOptions = { boxed: false };
  for (const n of names) {
    if (!(EXTRACTOR_NAMES as readonly string[]).includes(n))
      throw new Error(`--extract ${n}: unknown extractor; use any of ${EXTRACTOR_NAMES.join(', ')}`);
    out[n as keyof ExtractOptions] = true;
  }
  return out;
}

/**
 * `hacrl verify`: `--gold G --answer A` prints `true` or `false` (exit 0; exit 2 for an unparseable gold, 3 when no
 * verdict was reached, with the reason on stderr); `--input FILE` writes `{equal, reason, extracted}` per row and a
 * summary line with the counts on stderr. The answer is extracted from each response as a reward would (see
 * `extract`), unless `extracted` is set.
 */
export async function runVerify(o: VerifyCliOptions): Promise<void> {
  if (o.input === undefined && (o.gold === undefined || o.answer === undefined))
    throw new Error('verify needs --gold and --answer, or --input FILE.jsonl');
  if (o.input !== undefined && (o.gold !== undefined || o.answer !== undefined))
    throw new Error('verify takes either --gold/--answer or --input, not both');
  if (o.output !== undefined) await checkWritableFile(o.output, '--output');
  const how = extractOptions(o);
  const tried = EXTRACTOR_NAMES.filter((n) => how[n]).join(', ');
  const pool = new SymbolicPool({ timeoutMs: o.timeoutMs });
  try {
    const rows = o.input !== undefined ? await readJsonl(o.input, VerifyRow) : [{ gold: o.gold!, answer: o.answer! }];
    const found = rows.map((r) => extractAnswerWith(r.answer, how));
    const checked = rows.flatMap((r, i) => (found[i] ? [{ gold: r.gold, answer: found[i].answer }] : []));
    const { results: verdicts, stats } = await verifyMany(checked, { pool, timeoutMs: o.timeoutMs });
    const noAnswer: CheckResult = {
      equal: false,
      reason: 'unparseable-answer',
      detail: `no answer found by ${tried}${o.extracted ? '' : ' (pass --extracted if answers are already extracted)'}`,
    };
    let next = 0;
    const results = found.map((f) => (f ? verdicts[next++]! : noAnswer));
    // Responses with no answer count as checked and not equal, as the reward scores them 0.
    stats.checked += rows.length - checked.length;
    stats.notEqual += rows.length - checked.length;
    if (o.input === undefined) {
      const r = results[0]!;
      if (found[0] && !o.extracted) console.error(`hacrl verify: extracted "${found[0].answer}" (${found[0].by})`);
      if (r.equal !== null) console.log(String(r.equal));
      else {
        console.error(`hacrl verify: no verdict (${describe(r)})`);
        process.exitCode = r.reason === 'unparseable-gold' ? EXIT_UNPARSEABLE_GOLD : EXIT_NO_VERDICT;
      }
      if (r.equal === false && r.detail) console.error(`hacrl verify: ${describe(r)}`);
      return;
    }
    const out = results.map((r, i) => ({
      equal: r.equal,
      reason: r.reason,
      ...(r.detail ? { detail: r.detail } : {}),
      extracted: found[i]?.answer ?? null,
      ...(found[i] && !o.extracted ? { by: found[i].by } : {}),
    }));
    if (o.output !== undefined) await writeJsonl(o.output, out);
    else for (const r of out) console.log(JSON.stringify(r));
    console.error(summary(stats));
  } finally {
    await pool.close();
  }
}
