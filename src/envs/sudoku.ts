/**
 * Sudoku 4×4 (AT-GRPO spec): a generated solved grid with cells blanked only while the solution stays unique. An
 * answer counts only when it is a valid grid AND keeps every given.
 */
import { z } from 'zod';
import { parseSection } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { type EnvStep, type Environment, finishedStep, noActionStep } from './environment.js';
import { gridProgram, gridProgramRows } from './grid.js';

/** Sudoku knobs. */
export const SudokuOptionsSchema = z
  .object({
    /** Cells to blank (fewer if uniqueness stops earlier; 1–12); default 8. */
    blanks: z.number().int().min(1).max(12).default(8),
  })
  .strict();
/** Sudoku knobs with defaults filled in. */
export type SudokuOptions = z.output<typeof SudokuOptionsSchema>;

/** 16 cells row by row; 0 = blank, 1–4 = a digit. */
export type Grid4 = number[];

/** One generated puzzle. */
export interface SudokuInstance {
  /** 'sudoku:<seed>'. */
  id: string;
  /** The givens (0 = blank). */
  puzzle: Grid4;
  /** The unique solution. */
  solution: Grid4;
}

/** A Sudoku state: the puzzle and the grid as filled so far. */
export interface SudokuState {
  instance: SudokuInstance;
  grid: Grid4;
  solved: boolean;
}

/** Reward constants of the spec. */
export const SUDOKU_REWARD = {
  /** A complete valid grid keeping every given. */
  solved: 2,
  /** Partial credit: this times the fraction of the puzzle's blanks newly filled correctly. */
  partial: 1,
  /** A grid breaking the rules (a repeated digit, or a given changed). */
  broken: -0.5,
} as const;

/** The Sudoku environment with the given knobs. */
export function sudokuEnv(options: Partial<SudokuOptions> = {}): Environment<SudokuState, Grid4> {
  const o = parseSection(SudokuOptionsSchema, options, 'workflow.env', 'sudoku knobs');
  return {
    name: 'sudoku',
    actionFormat:
      'Answer with the grid as 4 lines of 4 digits 1-4 (a dot for a cell left blank), e.g.\n1234\n3412\n2143\n4321',
    reset: (seed) => {
      const instance = generateSudoku(seed, o);
      return { instance, grid: [...instance.puzzle], solved: false };
    },
    instanceId: (s) => s.instance.id,
    render: renderSudoku,
    parseAction: parseSudokuGrid,
    step: stepSudoku,
    solve: (s) => [...s.instance.solution],
    formatAction: formatGrid,
    program: sudokuProgram,
    programLibrary: {
      code: SOLVE_LIBRARY,
      help: 'solve(grid) returns the solved grid of a 4x4 grid drawn as above (a dot for a blank), as 4 lines.',
    },
    programOutput: sudokuProgramOutput,
  };
}

/** The cells of each row, column and 2×2 box. */
const UNITS: number[][] = (() => {
  const units: number[][] = [];
  for (let i = 0; i < 4; i++) {
    units.push([0, 1, 2, 3].map((j) => 4 * i + j));
    units.push([0, 1, 2, 3].map((j) => 4 * j + i));
    const r0 = 2 * Math.floor(i / 2);
    const c0 = 2 * (i % 2);
    units.push([0, 1, 2, 3].map((j) => 4 * (r0 + Math.floor(j / 2)) + c0 + (j % 2)));
  }
  return units;
})();

/** True when no row, column or box repeats a digit (blanks ignored). */
export function consistent(g: Grid4): boolean {
  return UNITS.every((u) => {
    const seen = u.map((i) => g[i]!).filter((v) => v !== 0);
    return new Set(seen).size === seen.length;
  });
}

/**
 * The completions of `g` that break no rule, in SOLVE_LIBRARY's search order (the first blank row by row, digits 1–4
 * ascending), by backtracking on `g` itself.
 */
function* completions(g: Grid4): Generator<Grid4> {
  if (!consistent(g)) return;
  const i = g.indexOf(0);
  if (i < 0) {
    yield [...g];
    return;
  }
  for (let v = 1; v <= 4; v++) {
    g[i] = v;
    yield* completions(g);
  }
  g[i] = 0;
}

/** Number of solutions of `g`, counting up to `limit`. */
export function countSolutions(g: Grid4, limit = 2): number {
  const found = completions([...g]);
  let n = 0;
  while (n < limit && !found.next().done) n++;
  return n;
}

/** The first completion of `g` that breaks no rule, or null; a generated puzzle's only completion is its solution. */
export function firstCompletion(g: Grid4): Grid4 | null {
  return completions([...g]).next().value ?? null;
}

/** Instance `seed`: a random solved grid, then blanks in random order, each kept only if the solution stays unique. */
export function generateSudoku(seed: number, o: SudokuOptions): SudokuInstance {
  const rng = new Rng(seed);
  const solution = randomSolvedGrid(rng);
  const puzzle = [...solution];
  let blanked = 0;
  for (const i of rng.shuffle(Array.from({ length: 16 }, (_, k) => k))) {
    if (blanked === o.blanks) break;
    const keep = puzzle[i]!;
    puzzle[i] = 0;
    if (countSolutions([...puzzle]) === 1) blanked++;
    else puzzle[i] = keep;
  }
  return { id: `sudoku:${seed}`, puzzle, solution };
}

/** A solved grid: the base pattern with digits relabelled, rows and columns shuffled within and across bands. */
function randomSolvedGrid(rng: Rng): Grid4 {
  const base = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1];
  const digits = rng.shuffle([1, 2, 3, 4]);
  const order = (): number[] => {
    const bands = rng.shuffle([0, 1]);
    return bands.flatMap((b) => rng.shuffle([2 * b, 2 * b + 1]));
  };
  const rows = order();
  const cols = order();
  const g = rows.flatMap((r) => cols.map((c) => digits[base[4 * r + c]! - 1]!));
  if (!consistent(g)) throw new Error('sudoku: internal error, shuffled grid is not a solution');
  return g;
}

/**
 * The grid in `text`: the last 4×4 JSON array (0 = blank), else the last 4 consecutive lines of 4 cells each ("1-4"
 * or "." / "0" for blank; spaces and "|" ignored); null when there is none.
 */
export function parseSudokuGrid(text: string): Grid4 | null {
  const arrays = text.match(/\[\s*(\[[^[\]]*\]\s*,?\s*){4}\]/g) ?? [];
  for (let k = arrays.length - 1; k >= 0; k--) {
    try {
      const v: unknown = JSON.parse(arrays[k]!);
      const flat = Array.isArray(v) && v.every((r) => Array.isArray(r) && r.length === 4) ? v.flat() : null;
      if (flat?.length === 16 && flat.every((x) => Number.isInteger(x) && x >= 0 && x <= 4)) return flat as Grid4;
    } catch {
      continue;
    }
  }
  const lines = text.split('\n').map((l) => l.replace(/[\s|]/g, ''));
  for (let end = lines.length; end >= 4; end--) {
    const block = lines.slice(end - 4, end);
    if (block.every((l) => /^[1-4.0]{4}$/.test(l)))
      return block
        .join('')
        .split('')
        .map((ch) => (ch === '.' ? 0 : Number(ch)));
  }
  return null;
}

/**
 * Scores an answer grid. No grid read: NO_ACTION_REWARD (−1), state unchanged; a repeated digit or a changed given −0.5 (unchanged); a
 * complete valid grid keeping the givens +2 (it is then the unique solution); otherwise partial credit
 * 1·(cells blank before this answer and now filled with the solution's digit) / (blanks of the puzzle), and the
 * grid becomes the new state. A solved puzzle ignores further answers (r_env 0: it is never paid twice).
 */
export function stepSudoku(state: SudokuState, answer: Grid4 | null): EnvStep<SudokuState> {
  if (state.solved) return finishedStep(state, true);
  if (answer === null) return noActionStep(state, 'no 4x4 grid could be read');
  const { instance } = state;
  const R = SUDOKU_REWARD;
  const result = (reward: number, part: string, next: SudokuState, feedback: string): EnvStep<SudokuState> => ({
    state: next,
    reward,
    done: next.solved,
    success: next.solved,
    parts: { [part]: reward },
    feedback,
  });
  const givenChanged = instance.puzzle.some((v, i) => v !== 0 && answer[i] !== v);
  if (givenChanged || !consistent(answer)) {
    const why = givenChanged ? 'a given was changed' : 'a digit repeats in a row, column or box';
    return result(R.broken, 'broken', state, `rejected: ${why}`);
  }
  const next = { instance, grid: [...answer], solved: !answer.includes(0) };
  if (next.solved) return result(R.solved, 'solved', next, 'solved');
  const blanks = instance.puzzle.filter((v) => v === 0).length;
  const newlyRight = answer.filter((v, i) => state.grid[i] === 0 && v !== 0 && v === instance.solution[i]).length;
  return result(
    (R.partial * newlyRight) / blanks,
    'partial',
    next,
    `accepted; ${next.grid.filter((v) => v === 0).length} cell(s) still blank`,
  );
}

/** 4 lines of 4 characters, '.' for blank. */
export function formatGrid(g: Grid4): string {
  return [0, 1, 2, 3]
    .map((r) =>
      g
        .slice(4 * r, 4 * r + 4)
        .map((v) => (v === 0 ? '.' : String(v)))
        .join(''),
    )
    .join('\n');
}

/** The puzzle with its givens, then the grid as filled so far. */
function renderSudoku(s: SudokuState): string {
  return [
    'Fill the 4x4 Sudoku: each row, column and 2x2 box holds 1, 2, 3, 4 once; keep the givens.',
    'Givens:',
    formatGrid(s.instance.puzzle),
    'Current grid:',
    formatGrid(s.grid),
  ].join('\n');
}

/**
 * The routine a Sudoku tool program may call, defined before it in the sandbox (a separate process, so it is JavaScript
 * source and cannot call firstCompletion): firstCompletion's search step for step on a grid drawn as the observation
 * draws it, printed as 4 lines; anything but 4 lines of 4 characters 1–4 or '.' gets a sentence that is no grid.
 */
const SOLVE_LIBRARY = `function solve(text) {
  const rows = text.split("\\n");
  if (rows.length !== 4 || rows.some((r) => !/^[1-4.]{4}$/.test(r))) return "not a 4x4 grid of 1-4 and dots";
  const g = rows.join("").split("").map((ch) => (ch === "." ? 0 : Number(ch)));
  const units = [];
  for (let i = 0; i < 4; i++) {
    const [r0, c0] = [2 * Math.floor(i / 2), 2 * (i % 2)];
    units.push([0, 1, 2, 3].map((j) => 4 * i + j), [0, 1, 2, 3].map((j) => 4 * j + i));
    units.push([0, 1, 2, 3].map((j) => 4 * (r0 + Math.floor(j / 2)) + c0 + (j % 2)));
  }
  const ok = () => units.every((u) => { const s = u.map((k) => g[k]).filter((v) => v); return new Set(s).size === s.length; });
  const fill = () => {
    if (!ok()) return false;
    const i = g.indexOf(0);
    if (i < 0) return true;
    for (let v = 1; v <= 4; v++) { g[i] = v; if (fill()) return true; }
    g[i] = 0;
    return false;
  };
  return fill() ? [0, 1, 2, 3].map((r) => g.slice(4 * r, 4 * r + 4).join("")).join("\\n") : "no solution";
}`;

/**
 * The tool agent's expert program (in the paper the tool agent writes a Sudoku solver; a small agent calls the routine
 * above instead of writing it out): the givens as the observation draws them, copied into the call.
 */
export function sudokuProgram(s: SudokuState): string {
  return gridProgram('solve', formatGrid(s.instance.puzzle).split('\n'));
}

/**
 * What a program in sudokuProgram's template prints, without running it: firstCompletion of the grid it copied (or
 * "no solution"), when that copy is 4 rows of 4 characters 1–4 or '.'; null otherwise (such a copy runs in the sandbox).
 */
export function sudokuProgramOutput(code: string): string | null {
  const rows = gridProgramRows('solve', code, '1234.');
  if (rows === null || rows.length !== 4 || rows[0]!.length !== 4) return null;
  const solved = firstCompletion([...rows.join('')].map((ch) => (ch === '.' ? 0 : Number(ch))));
  return `${solved === null ? 'no solution' : formatGrid(solved)}\n`;
}
