// Problems read from JSON Lines files: GSM8K, MATH-style and a plain {prompt, answer} schema, detected from the
// first row or named. Every row is validated; a bad one raises an error naming the file and line.
import { basename, dirname, extname } from 'node:path';
import { z } from 'zod';
import { readJsonl } from '../util/jsonl.js';
import { extractBoxed } from '../rewards/extract.js';
import { readTextFile } from '../util/text-file.js';
import type { Dataset, Problem } from './problem.js';

/** The schemas a task file can have. */
export type FileSchema = 'gsm8k' | 'math' | 'plain';

/** Options for loadTaskFile. */
export interface LoadTaskFileOptions {
  /** The schema; default: detected from the first row (question+answer: gsm8k; problem: math; prompt: plain). */
  schema?: FileSchema;
  /** The data set name; default `<folder>-<file name without extension>`, e.g. 'gsm8k-train'. */
  name?: string;
}

/** A row turned into a problem, without id and task. */
type Row = Pick<Problem, 'prompt' | 'answer' | 'solution' | 'difficulty'> & { id?: string };

/** GSM8K's gold answer: the text after the last `####`, without thousands separators; null when absent. */
export function gsm8kGold(answer: string): string | null {
  const at = answer.lastIndexOf('####');
  if (at < 0) return null;
  const gold = answer
    .slice(at + 4)
    .trim()
    .replace(/,/g, '');
  return gold === '' ? null : gold;
}

/** A GSM8K rationale without its `<<48/2=24>>` calculator annotations, and without the `#### gold` line. */
export function gsm8kRationale(answer: string): string {
  const at = answer.lastIndexOf('####');
  return (at < 0 ? answer : answer.slice(0, at)).replace(/<<[^<>]*>>/g, '').trim();
}

// Solutions from files keep their own wording; one that never boxes its answer gets a last `\boxed{}` line, so
// every Problem's solution states its answer the same way.
function withBoxed(solution: string | undefined, answer: string): string {
  if (solution === undefined || solution.trim() === '') return `\\boxed{${answer}}`;
  return solution.includes('\\boxed') ? solution : `${solution.trimEnd()}\n\\boxed{${answer}}`;
}

const answerField = z.union([z.string(), z.number()]).transform((v) => `${v}`.trim());

const GSM8K_ROW = z.looseObject({ question: z.string().min(1), answer: z.string() }).transform((r, ctx): Row => {
  const gold = gsm8kGold(r.answer);
  if (gold === null) {
    ctx.addIssue({ code: 'custom', message: 'answer has no "#### <gold>" at its end', path: ['answer'] });
    return z.NEVER;
  }
  return { prompt: r.question, answer: gold, solution: withBoxed(gsm8kRationale(r.answer), gold), difficulty: {} };
});

const MATH_ROW = z
  .looseObject({
    problem: z.string().min(1),
    solution: z.string().optional(),
    answer: answerField.optional(),
    level: z.union([z.string(), z.number()]).optional(),
  })
  .transform((r, ctx): Row => {
    const answer = r.answer ?? (r.solution === undefined ? null : extractBoxed(r.solution));
    if (answer === null || answer === '') {
      ctx.addIssue({ code: 'custom', message: 'no answer field and no \\boxed{…} in the solution', path: ['answer'] });
      return z.NEVER;
    }
    // MATH writes levels as "Level 3"; "Level ?" and other text leave the difficulty empty.
    const level = /^(?:Level\s*)?(\d+)$/i.exec(`${r.level ?? ''}`.trim());
    const difficulty: Record<string, number> = level ? { level: Number(level[1]) } : {};
    return { prompt: r.problem, answer, solution: withBoxed(r.solution, answer), difficulty };
  });

const PLAIN_ROW = z
  .looseObject({
    prompt: z.string().min(1),
    answer: answerField.pipe(z.string().min(1, 'answer is empty')),
    solution: z.string().optional(),
    id: z.union([z.string(), z.number()]).optional(),
  })
  .transform((r): Row => ({
    prompt: r.prompt,
    answer: r.answer,
    solution: withBoxed(r.solution, r.answer),
    difficulty: {},
    ...(r.id === undefined ? {} : { id: `${r.id}` }),
  }));

const ROW_SCHEMAS: Record<FileSchema, z.ZodType<Row, unknown>> = { gsm8k: GSM8K_ROW, math: MATH_ROW, plain: PLAIN_ROW };

/** The schema of a parsed first row, or null when it fits none. */
export function detectSchema(row: unknown): FileSchema | null {
  if (typeof row !== 'object' || row === null) return null;
  const has = (k: string): boolean => k in row;
  if (has('question') && has('answer')) return 'gsm8k';
  if (has('problem')) return 'math';
  if (has('prompt') && has('answer')) return 'plain';
  return null;
}

/** Loads a task file as a Dataset; ids are `<name>-<row index>` unless a plain row gives its own `id`. */
export async function loadTaskFile(path: string, opts: LoadTaskFileOptions = {}): Promise<Dataset> {
  const schema = opts.schema ?? (await detectFileSchema(path));
  const rows = await readJsonl(path, ROW_SCHEMAS[schema]);
  const name = opts.name ?? `${basename(dirname(path))}-${basename(path, extname(path))}`;
  const problems = rows.map(({ id, ...row }, i): Problem => ({ id: id ?? `${name}-${i}`, task: schema, ...row }));
  return { name, problems };
}

async function detectFileSchema(path: string): Promise<FileSchema> {
  const lines = (await readTextFile(path)).split('\n');
  const i = lines.findIndex((l) => l.trim() !== '');
  if (i < 0) throw new Error(`${path}: no rows`);
  let row: unknown;
  try {
    row = JSON.parse(lines[i]!);
  } catch (e) {
    throw new Error(`${path}:${i + 1}: not valid JSON (${(e as Error).message})`);
  }
  const schema = detectSchema(row);
  if (schema === null) {
    const keys = typeof row === 'object' && row !== null ? Object.keys(row).join(', ') : typeof row;
    throw new Error(
      `${path}:${i + 1}: cannot tell the schema from this row (keys: ${keys}); expected question+answer (gsm8k), ` +
        'problem (math) or prompt+answer (plain)',
    );
  }
  return schema;
}
