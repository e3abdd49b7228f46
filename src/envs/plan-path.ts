/**
 * Plan-Path (AT-GRPO spec): reach the goal on a grid with random walls by writing a JSON list of moves. Every
 * generated instance has its goal reachable from its start (checked by BFS; regenerated otherwise).
 */
import { z } from 'zod';
import { parseSection } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { type EnvStep, type Environment, finishedStep, noActionStep } from './environment.js';
import {
  type Cell,
  type Move,
  MoveFormatSchema,
  cellsOf,
  drawGrid,
  formatMoveList,
  gridPath,
  gridProgram,
  gridProgramRows,
  isFloor,
  manhattan,
  moveCell,
  moveListAction,
  sameCell,
} from './grid.js';

/** Plan-Path knobs (the difficulty dials for small agents). */
export const PlanPathOptionsSchema = z
  .object({
    /** Grid rows; default 10 (the reference). */
    height: z.number().int().min(2).max(40).default(10),
    /** Grid columns; default 10 (the reference). */
    width: z.number().int().min(2).max(40).default(10),
    /** Probability that a cell is a wall; default 0.22 (the reference). */
    wallProb: z.number().min(0).max(0.6).default(0.22),
    /** Fewest moves of the shortest path from start to goal; default 1, at most 1600 (a 40×40 grid's cells). */
    minShortest: z.number().int().min(1).max(1600).default(1),
    /** Most moves of the shortest path (small values make easy instances); default 0 = no limit; at most 1600. */
    maxShortest: z.number().int().min(0).max(1600).default(0),
    /** How move lists are written in prompts and answers: 'json' (`["R","D"]`, the spec's) or 'letters' (`RD`); default 'json'. */
    moves: MoveFormatSchema.default('json'),
  })
  .strict();
/** Plan-Path knobs with defaults filled in. */
export type PlanPathOptions = z.output<typeof PlanPathOptionsSchema>;

/** One generated Plan-Path instance. */
export interface PlanPathInstance {
  /** 'plan-path:<seed>'. */
  id: string;
  /** Rows of '#' (wall) and '.' (free). */
  rows: string[];
  start: Cell;
  goal: Cell;
  /** Length of the BFS shortest path from start to goal. */
  shortest: number;
}

/** A Plan-Path state: the instance, where the agent is now, and its valid moves so far. */
export interface PlanPathState {
  instance: PlanPathInstance;
  /** The agent's CURRENT position (carried over between turns). */
  pos: Cell;
  /** Valid moves made since the start (for the shortest-path bonus). */
  validMoves: number;
  /** True once the goal is reached. */
  atGoal: boolean;
}

/** Reward constants of the spec. */
export const PLAN_PATH_REWARD = {
  /** Per valid move. */
  valid: -0.01,
  /** Per invalid move (into a wall or off the grid; position unchanged). */
  invalid: -0.1,
  /** Shaping weight of 0.99·φ(s′) − φ(s), φ = −Manhattan distance to the goal. */
  shaping: 1.0,
  /** Discount inside the shaping term. */
  gamma: 0.99,
  /** On reaching the goal. */
  goal: 1.0,
  /** More when the valid moves so far equal the BFS shortest length. */
  optimal: 0.5,
} as const;

const GENERATION_ATTEMPTS = 10_000;

/** The Plan-Path environment with the given knobs. */
export function planPathEnv(options: Partial<PlanPathOptions> = {}): Environment<PlanPathState, Move[]> {
  const o = parseSection(PlanPathOptionsSchema, options, 'workflow.env', 'plan-path knobs');
  return {
    name: 'plan-path',
    ...moveListAction(o.moves),
    reset: (seed) => initialState(generatePlanPath(seed, o)),
    instanceId: (s) => s.instance.id,
    render: renderPlanPath,
    step: stepPlanPath,
    solve: (s) => gridPath({ rows: s.instance.rows }, s.pos, s.instance.goal),
    program: planPathProgram,
    programLibrary: {
      code: PATH_LIBRARY,
      help: 'path(grid) returns the moves from A to G of a grid drawn as above, as a JSON list.',
    },
    programOutput: planPathProgramOutput,
  };
}

/** The state at the start of an instance. */
function initialState(instance: PlanPathInstance): PlanPathState {
  return { instance, pos: instance.start, validMoves: 0, atGoal: false };
}

/** Instance `seed`: walls with probability wallProb, distinct free start and goal, regenerated until reachable. */
export function generatePlanPath(seed: number, o: PlanPathOptions): PlanPathInstance {
  const rng = new Rng(seed);
  for (let attempt = 0; attempt < GENERATION_ATTEMPTS; attempt++) {
    const rows = Array.from({ length: o.height }, () =>
      Array.from({ length: o.width }, () => (rng.next() < o.wallProb ? '#' : '.')).join(''),
    );
    const free: Cell[] = [];
    rows.forEach((row, r) => [...row].forEach((ch, c) => ch === '.' && free.push([r, c])));
    if (free.length < 2) continue;
    const start = free[rng.int(free.length)]!;
    const goal = free[rng.int(free.length)]!;
    if (sameCell(start, goal)) continue;
    const path = gridPath({ rows }, start, goal);
    if (path === null || path.length < o.minShortest) continue;
    if (o.maxShortest > 0 && path.length > o.maxShortest) continue;
    return { id: `plan-path:${seed}`, rows, start, goal, shortest: path.length };
  }
  throw new Error(
    `plan-path: no reachable instance in ${GENERATION_ATTEMPTS} draws for ${JSON.stringify(o)}; ` +
      'lower wallProb or minShortest, or raise maxShortest',
  );
}

/** φ(s) = −Manhattan distance from `pos` to the goal. */
function potential(s: PlanPathInstance, pos: Cell): number {
  return -manhattan(pos, s.goal);
}

/**
 * Applies the moves one by one. Per move: −0.01 valid or −0.10 invalid (position unchanged), plus
 * 1.0·(0.99·φ(s′) − φ(s)); on reaching the goal +1.0, and +0.5 more when the valid moves so far equal the BFS shortest
 * length. Moves after the goal is reached are ignored; an action on a finished episode gets 0. No action (null or [])
 * gets NO_ACTION_REWARD (−1) and moves nothing.
 */
export function stepPlanPath(state: PlanPathState, moves: readonly Move[] | null): EnvStep<PlanPathState> {
  if (state.atGoal) return finishedStep(state, true);
  if (moves === null || moves.length === 0)
    return noActionStep(state, moves === null ? 'no move list could be read' : 'no move made');
  const inst = state.instance;
  const R = PLAN_PATH_REWARD;
  const parts = { move: 0, invalid: 0, shaping: 0, goal: 0, optimal: 0 };
  let { pos, validMoves } = state;
  let atGoal = false;
  let invalid = 0;
  for (const m of moves) {
    if (atGoal) break;
    const next = moveCell(pos, m);
    const ok = isFloor({ rows: inst.rows }, next);
    const after = ok ? next : pos;
    if (ok) {
      parts.move += R.valid;
      validMoves++;
    } else {
      parts.invalid += R.invalid;
      invalid++;
    }
    parts.shaping += R.shaping * (R.gamma * potential(inst, after) - potential(inst, pos));
    pos = after;
    if (sameCell(pos, inst.goal)) {
      atGoal = true;
      parts.goal += R.goal;
      if (validMoves === inst.shortest) parts.optimal += R.optimal;
    }
  }
  const reward = parts.move + parts.invalid + parts.shaping + parts.goal + parts.optimal;
  const where = atGoal ? 'reached the goal' : `now at (${pos[0]}, ${pos[1]})`;
  const feedback = `${where}; ${invalid} invalid move(s)`;
  return { state: { instance: inst, pos, validMoves, atGoal }, reward, done: atGoal, success: atGoal, parts, feedback };
}

/** The grid's rows with the CURRENT position (A) and the goal (G) drawn in. */
function markedRows(s: PlanPathState): string[] {
  const { rows, goal } = s.instance;
  return drawGrid({ rows }, (cell, ch) => (sameCell(cell, s.pos) ? 'A' : sameCell(cell, goal) ? 'G' : ch));
}

/** The grid with the CURRENT position (A) and the goal (G), then both as coordinates. */
export function renderPlanPath(s: PlanPathState): string {
  const { goal } = s.instance;
  return [
    'Grid (# wall, . free, A you, G goal; row 0 is the top):',
    ...markedRows(s),
    `You are at (row ${s.pos[0]}, col ${s.pos[1]}); the goal is at (row ${goal[0]}, col ${goal[1]}).`,
  ].join('\n');
}

/**
 * The routine a Plan-Path tool program may call, defined before it in the sandbox: the breadth-first moves from A to
 * G of a grid drawn as the observation draws it, as a JSON list (the solver's search: moves in the order U, D, L, R,
 * each cell reached first from the earliest one).
 */
const PATH_LIBRARY = `function path(text) {
  const g = text.split("\\n");
  const find = (ch) => { for (let r = 0; r < g.length; r++) { const c = g[r].indexOf(ch); if (c >= 0) return [r, c]; } };
  const seen = new Set([String(find("A"))]);
  for (let layer = [[find("A"), ""]]; layer.length; ) {
    const next = [];
    for (const [[r, c], p] of layer) {
      if (g[r][c] === "G") return JSON.stringify([...p]);
      for (const [m, dr, dc] of [["U", -1, 0], ["D", 1, 0], ["L", 0, -1], ["R", 0, 1]]) {
        const [x, y] = [r + dr, c + dc];
        if (!g[x] || !g[x][y] || g[x][y] === "#" || seen.has(String([x, y]))) continue;
        seen.add(String([x, y]));
        next.push([[x, y], p + m]);
      }
    }
    layer = next;
  }
  return "no path";
}`;

/**
 * The tool agent's expert program (in the paper the tool agent writes a path-finding program; a small agent calls
 * the routine above instead of writing it out): the grid as the observation draws it, copied into the call.
 */
export function planPathProgram(s: PlanPathState): string {
  return gridProgram('path', markedRows(s));
}

/**
 * What a program in planPathProgram's template prints, without running it: the breadth-first path from A to G of
 * the grid it copied, when that grid is rectangular, of . # A G only, with one A and one G that A reaches; null
 * otherwise (such a copy runs in the sandbox).
 */
export function planPathProgramOutput(code: string): string | null {
  const rows = gridProgramRows('path', code, '.#AG');
  if (rows === null) return null;
  const [a, g] = [cellsOf(rows, 'A'), cellsOf(rows, 'G')];
  if (a.length !== 1 || g.length !== 1) return null;
  const path = gridPath({ rows }, a[0]!, g[0]!);
  return path === null ? null : `${formatMoveList(path)}\n`;
}
