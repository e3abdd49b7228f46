/** Grid geometry shared by Plan-Path and Sokoban: cells, the four moves, the move-list action and BFS. */
import { z } from 'zod';

/** A cell as [row, column], both from 0 at the top left. */
export type Cell = readonly [number, number];

/** The four moves: Up, Down, Left, Right. */
export type Move = 'U' | 'D' | 'L' | 'R';

/** Row and column change of each move. */
export const MOVE_DELTA: Readonly<Record<Move, Cell>> = { U: [-1, 0], D: [1, 0], L: [0, -1], R: [0, 1] };

const MOVES: readonly Move[] = ['U', 'D', 'L', 'R'];

/** The neighbour of `c` one move away (may lie outside the grid). */
export function moveCell(c: Cell, m: Move): Cell {
  const d = MOVE_DELTA[m];
  return [c[0] + d[0], c[1] + d[1]];
}

/** Manhattan distance between two cells. */
export function manhattan(a: Cell, b: Cell): number {
  return Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]);
}

/** True when both cells are the same. */
export function sameCell(a: Cell, b: Cell): boolean {
  return a[0] === b[0] && a[1] === b[1];
}

/**
 * The move list in `text`: the last JSON array whose items are all "U", "D", "L" or "R" (so reasoning before the
 * answer may contain other brackets); null when there is none. `[]` is a valid (empty) list.
 */
export function parseMoveList(text: string): Move[] | null {
  const arrays = text.match(/\[[^[\]]*\]/g) ?? [];
  for (let i = arrays.length - 1; i >= 0; i--) {
    let value: unknown;
    try {
      value = JSON.parse(arrays[i]!);
    } catch {
      continue;
    }
    if (Array.isArray(value) && value.every((v): v is Move => typeof v === 'string' && MOVES.includes(v as Move)))
      return value;
  }
  return null;
}

/** The canonical text of a move list, e.g. `["R","D"]`. */
export function formatMoveList(moves: readonly Move[]): string {
  return JSON.stringify(moves);
}

/** The moves in `text` written as one word of letters, e.g. `RD`: the last such word; null when there is none. */
export function parseMoveWord(text: string): Move[] | null {
  const words = text.match(/\b[UDLR]+\b/g);
  return words ? ([...words[words.length - 1]!] as Move[]) : null;
}

/**
 * How a move list is written in prompts and answers: `json`, the spec's `["R","D"]`, or `letters`, one word `RD`.
 * A 2-layer character-level agent learns to copy a teammate's 5–11-move list written as letters within 500 SFT steps
 * and fails to within 1,000 when it is written as JSON, whose quotes and commas repeat (docs/at-grpo.md).
 */
export const MoveFormatSchema = z.enum(['json', 'letters']);
/** A move-list format: 'json' or 'letters'. */
export type MoveFormat = z.output<typeof MoveFormatSchema>;

const MOVE_NAMES = 'U (up), D (down), L (left), R (right)';

/**
 * The action half of a move-list environment: how to write, read and print a list of moves in `format`. With
 * `letters` a JSON list is read too, since the tool agent's sandbox routines print one.
 */
export function moveListAction(format: MoveFormat): {
  actionFormat: string;
  parseAction: (text: string) => Move[] | null;
  formatAction: (moves: readonly Move[]) => string;
} {
  if (format === 'json')
    return {
      actionFormat: `Answer with a JSON list of moves, ${MOVE_NAMES}, e.g. ["R","D"].`,
      parseAction: parseMoveList,
      formatAction: formatMoveList,
    };
  return {
    actionFormat: `Answer with the moves as one word of letters, ${MOVE_NAMES}, e.g. RD.`,
    parseAction: (text) => parseMoveList(text) ?? parseMoveWord(text),
    formatAction: (moves) => moves.join(''),
  };
}

/**
 * Breadth-first search over abstract states: the shortest move list from `start` to a state where `isGoal` holds,
 * or null when none is reachable. `next` gives the state after a move, or null when the move is impossible; `key`
 * identifies states. Moves are tried in the order U, D, L, R, so the answer is deterministic.
 */
export function bfs<T>(
  start: T,
  isGoal: (s: T) => boolean,
  next: (s: T, m: Move) => T | null,
  key: (s: T) => string,
): Move[] | null {
  if (isGoal(start)) return [];
  const parent = new Map<string, { from: string; move: Move } | null>([[key(start), null]]);
  let frontier: T[] = [start];
  while (frontier.length > 0) {
    const nextFrontier: T[] = [];
    for (const s of frontier) {
      for (const m of MOVES) {
        const t = next(s, m);
        if (t === null) continue;
        const k = key(t);
        if (parent.has(k)) continue;
        parent.set(k, { from: key(s), move: m });
        if (isGoal(t)) return pathTo(parent, k);
        nextFrontier.push(t);
      }
    }
    frontier = nextFrontier;
  }
  return null;
}

/** The moves leading to state `k` in a BFS parent map. */
function pathTo(parent: Map<string, { from: string; move: Move } | null>, k: string): Move[] {
  const moves: Move[] = [];
  for (let link = parent.get(k); link; link = parent.get(link.from)) moves.push(link.move);
  return moves.reverse();
}

/** A walled grid as rows of characters ('#' wall, anything else floor). */
export interface WallGrid {
  /** Rows of equal length; '#' marks a wall. */
  readonly rows: readonly string[];
}

/** True when `c` lies inside the grid and is not a wall. */
export function isFloor(g: WallGrid, c: Cell): boolean {
  const row = g.rows[c[0]];
  return row !== undefined && c[1] >= 0 && c[1] < row.length && row[c[1]] !== '#';
}

/** The text key of a cell, "r,c". */
export function cellKey(c: Cell): string {
  return `${c[0]},${c[1]}`;
}

/** Shortest move list between two floor cells of a walled grid, or null when unreachable. */
export function gridPath(g: WallGrid, from: Cell, to: Cell): Move[] | null {
  return bfs<Cell>(
    from,
    (c) => sameCell(c, to),
    (c, m) => {
      const t = moveCell(c, m);
      return isFloor(g, t) ? t : null;
    },
    cellKey,
  );
}

/** The rows with each cell's character chosen by `draw(cell, character)` (e.g. to draw the agent and the goal). */
export function drawGrid(g: WallGrid, draw: (cell: Cell, ch: string) => string): string[] {
  return g.rows.map((row, r) => [...row].map((ch, c) => draw([r, c], ch)).join(''));
}

/**
 * A tool program that prints what the sandbox routine `routine` returns for a grid copied as text:
 * console.log(routine(`rows`)) (the grid environments' expert programs).
 */
export function gridProgram(routine: string, rows: readonly string[]): string {
  return `console.log(${routine}(\`${rows.join('\n')}\`))`;
}

/**
 * The rows of the grid a program in gridProgram's template passes to `routine`, when they form a rectangle drawn with
 * the characters of `alphabet` only; null otherwise (the program is then not certain to print what an in-process
 * solver works out).
 */
export function gridProgramRows(routine: string, code: string, alphabet: string): string[] | null {
  const prefix = `console.log(${routine}(\``;
  const text = code.trim();
  if (!text.startsWith(prefix) || !text.endsWith('`))')) return null;
  const rows = text.slice(prefix.length, -3).split('\n');
  const ok = (r: string): boolean => r.length === rows[0]!.length && [...r].every((ch) => alphabet.includes(ch));
  return rows[0]!.length > 0 && rows.every(ok) ? rows : null;
}

/** The cells of the rows whose character is one of `chars`, row by row. */
export function cellsOf(rows: readonly string[], chars: string): Cell[] {
  return rows.flatMap((row, r) => [...row].flatMap((ch, c) => (chars.includes(ch) ? [[r, c] as Cell] : [])));
}
