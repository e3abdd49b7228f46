import { z } from 'zod';
import { verifyMany, type CheckResult, type VerifyStats } from '../rewards/math-equal.js';
import { SymbolicPool } from '../rewards/worker-pool.js';
import { readJsonl, writeJsonl } from '../util/jsonl.js';

const text = z.union([z.string(), z.number().transform(String)]);
/** A row to check: the gold (bare, `#### 18` or with `\boxed{}`) and the already-extracted answer. */
const VerifyRow = z.object({ gold: text, answer: z.union([text, z.null().transform(() => '')]) });

/** Options of `hacrl verify`. */
export interface VerifyCliOptions {
  /** One gold answer (with `answer`); prints true or false. */
  gold?: string;
  /** One answer to check against `gold`. */
  answer?: string;
  /** JSONL rows {gold, answer}; writes {equal, reason} per row. */
  input?: string;
  /** Output JSONL path for `input`; default: standard output. */
  output?: string;
  /** Time limit per symbolic check in milliseconds; default 2000. */
  timeoutMs: number;
}

/** Exit status for a gold that cannot be parsed (one-pair form). */
const EXIT_UNPARSEABLE_GOLD = 2;
/** Exit status for a check with no verdict (time-out or worker failure; one-pair form). */
const EXIT_NO_VERDICT = 3;

function summary(s: VerifyStats): string {
  return (
    `verify: checked ${s.checked}, equal ${s.equal}, not equal ${s.notEqual}, timeouts ${s.timeouts}, ` +
    `unparseable golds ${s.unparseableGold}, other ${s.other} (symbolic ${s.symbolic})`
  );
}

function describe(r: CheckResult): string {
  return r.detail ? `${r.reason}: ${r.detail}` : r.reason;
}

/**
 * `hacrl verify`: `--gold G --answer A` prints `true` or `false` (exit 0; exit 2 for an unparseable gold, 3 when no
 * verdict was reached, with the reason on stderr); `--input FILE` writes `{equal, reason}` per row and a summary
 * line with the counts on stderr.
 */
export async function runVerify(o: VerifyCliOptions): Promise<void> {
  if (o.input === undefined && (o.gold === undefined || o.answer === undefined))
    throw new Error('verify needs --gold and --answer, or --input FILE.jsonl');
  if (o.input !== undefined && (o.gold !== undefined || o.answer !== undefined))
    throw new Error('verify takes either --gold/--answer or --input, not both');
  const pool = new SymbolicPool({ timeoutMs: o.timeoutMs });
  try {
    const rows = o.input !== undefined ? await readJsonl(o.input, VerifyRow) : [{ gold: o.gold!, answer: o.answer! }];
    const { results, stats } = await verifyMany(rows, { pool, timeoutMs: o.timeoutMs });
    if (o.input === undefined) {
      const r = results[0]!;
      if (r.equal !== null) console.log(String(r.equal));
      else {
        console.error(`hacrl verify: no verdict (${describe(r)})`);
        process.exitCode = r.reason === 'unparseable-gold' ? EXIT_UNPARSEABLE_GOLD : EXIT_NO_VERDICT;
      }
      return;
    }
    const out = results.map((r) => (r.detail ? r : { equal: r.equal, reason: r.reason }));
    if (o.output !== undefined) await writeJsonl(o.output, out);
    else for (const r of out) console.log(JSON.stringify(r));
    console.error(summary(stats));
  } finally {
    await pool.close();
  }
}
