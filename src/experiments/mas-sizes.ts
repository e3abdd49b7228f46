/** The sizes of `hacrl bench mas`: full, --fast (a pipeline check of every family) and --tiny (tests). */
import { SOKOBAN_BENCH } from '../envs/sokoban.js';
import type { BenchMasOptions } from './mas-options.js';

/** Plan-Path 4×4, 2 turns: small enough that warm-started small agents start with signal. */
const PLAN_PATH = {
  name: 'plan-path',
  env: { height: 4, width: 4, wallProb: 0.1, maxShortest: 3 },
  maxTurns: 2,
  groupSize: 4,
};
/** Short answers: a move list or a 4×4 grid needs fewer than 24 tokens. */
const SHORT = { tool: { maxNewTokens: 24 }, planner: { maxNewTokens: 24 } };
/**
 * Sudoku 4×4 with 3 blanks, 2 turns, the tool agent writing a program that calls the sandbox's Sudoku search on the
 * givens it copies from its observation (src/envs/sudoku.ts), as Plan-Path's and Sokoban's tools do and as the paper's
 * Sudoku tool agent writes a solver; RL as theirs (group filter off). With the tool proposing a grid as text (filter
 * on) AT-GRPO raised the workflow +22 to +37 points with every BLAS library but ended above single-agent GRPO with
 * one library of three (docs/at-grpo.md, "Math-tool, and Sudoku with the tool proposing a grid, over five seeds").
 */
const SUDOKU = {
  name: 'sudoku',
  env: { blanks: 3 },
  maxTurns: 2,
  groupSize: 4,
  toolMode: 'code',
  groupFilter: { lowMeanRatio: 0 },
};

/** Plan-Path 5×5 for the full size: a 3,000-step warm start leaves the code workflow at 50% greedy, room for RL. */
const PLAN_PATH_5 = {
  ...PLAN_PATH,
  env: { height: 5, width: 5, wallProb: 0.15, maxShortest: 4 },
  toolMode: 'code',
  // Every group trains: with the 50% low-mean drop on, RL at lr 3e-4 lowered greedy success on calibration.
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * Sokoban with rooms that need 3 or 4 pushes (SOKOBAN_BENCH), 2 turns, the tool agent writing a program that calls the
 * sandbox's Sokoban search on the room it copies from its observation (src/envs/sokoban.ts), as Plan-Path's tool does:
 * with the tool proposing a move list as text, the warm start stayed at 0% calibration success to 900 steps. Moves are
 * written as letters (`RUR`): the 64×2 agent copies a teammate's 5–11-move list written so within 500 SFT steps and
 * not within 1,000 as JSON (`npm run bench:copy`), and with JSON the workflow's warm start reached the band with one
 * BLAS library of three. RL as Plan-Path's (group filter off).
 */
const SOKOBAN = {
  name: 'sokoban',
  env: { ...SOKOBAN_BENCH, moves: 'letters' },
  maxTurns: 2,
  groupSize: 4,
  toolMode: 'code',
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * The coding workflow with the coder first (PettingLLMs' order: coder, then tester; a failed coder revises in turn 2
 * after the tester's cases), RL as Plan-Path's (group filter off). With the tester first (one turn) AT-GRPO lowered
 * the workflow below its warm start in all 8 runs on 400 calibration instances (mean −10.9 points: the tester's RL
 * cases misled the coder); with the coder first it kept or raised it (docs/at-grpo.md, "Coding with the coder first").
 */
const CODING = {
  name: 'coding',
  maxTurns: 2,
  agents: ['coder', 'tester'],
  groupSize: 4,
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * Math with a tool (arith, 2-digit + and −), one turn: the tool agent writes a program whose last line prints the
 * answer, run in the sandbox (its warm-start trace computes it from the question's numbers: `console.log(70-30)` for
 * "What is 70-30?", worked out without a process, src/envs/math.ts); the reasoner answers in \boxed{}. One turn
 * for the reason coding has one (so the bench's detours, applied only before a last turn, never happen); RL as
 * Plan-Path's (group filter off).
 */
const MATH_TOOL = {
  name: 'math-tool',
  env: { task: 'arith', difficulty: { digits: 2, digits2: 2 } },
  maxTurns: 1,
  groupSize: 4,
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * The band every full-size warm start stops in: 20–40% greedy on 100 calibration instances, checked every 100 steps.
 * Zoo-sized agents start at 10–40% (issue aim); 20% leaves a signal for RL in most groups, 40% leaves 60 points of
 * headroom, and a start of 84% was lowered by RL (docs/at-grpo.md, "Warm starts in a band").
 */
const BAND = { low: 0.2, high: 0.4, every: 100, instances: 100 };

/**
 * The coding warm start: at most 1,500 steps on 24,000 solver rows (each once), on the bench's 64×2 agent (about
 * 0.1M parameters). In half of its episodes the coder's first program is one of the task's mutants and in half the
 * tester's cases are a mutant's (detours before the last turn), so the second turn is taught: a coder that revises
 * after a wrong first answer and does not simply copy the cases (with the tester first and only right cases shown,
 * the coder learned to copy them: docs/at-grpo.md, "Why AT-GRPO lowered coding").
 */
const CODING_WARM_START = { steps: 1500, rows: 24_000, batchSize: 16, detour: 0.5 };

/**
 * Full size. Plan-Path 5×5 (2 turns) with the tool agent writing a program that calls the sandbox's path-finding
 * routine on the grid it copies from its observation (src/envs/plan-path.ts), 64×2 agents. Chosen on calibration
 * instances (seeds from 1.8·10⁹, disjoint from the held-out ones; docs/at-grpo.md), never on held-out:
 * - every warm start stops in BAND (at most 3,000 steps of 16 on 48,000 solver rows, each seen once) with detours
 *   (half of the applied actions before the last turn are another instance's); a fixed 3,000 steps left the workflow
 *   at 50% greedy on 400 calibration instances on one CPU and 84% held-out on another (4×4: 100%; 6×6 with walls
 *   0.2: 4%); a warm start that misses the band is tried again with the next batch order, up to 3 tries (Sokoban's
 *   workflow with OpenBLAS: 3% after 3,000 steps with batch order 0, where oneDNN's stopped at 28% after 1,000);
 * - advantages only centred (Dr. GRPO): with Plan-Path's dense shaping, dividing by a group's std turns differences of
 *   0.02 between failed candidates into full-size advantages;
 * - lr 3e-4, 80 steps of 16 instances, group filter off: 50 → 69% and 52% greedy (shared, RL seeds 0 and 1), 66.5%
 *   (per-role); lr 1e-4 with the default filter: 51%. On 4×4 every RL setting lowered greedy success.
 */
export const BENCH_FULL: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [PLAN_PATH_5, SUDOKU, SOKOBAN, CODING, MATH_TOOL],
  perWorkflow: { coding: { warmStart: CODING_WARM_START } },
  steps: 80,
  instancesPerStep: 16,
  heldOut: 100,
  lr: 3e-4,
  advantage: 'none',
  agent: { hidden: 64, layers: 2, heads: 4 },
  warmStart: { steps: 3000, rows: 48_000, batchSize: 16, detour: 0.5, band: { ...BAND, attempts: 3 } },
};

/**
 * --fast: tiny agents and short training, so that every family fits a busy machine: it checks each family's pipeline
 * end to end (rooms, sandbox, banded warm starts, arms); its numbers are not the claim (the full size is). The band is
 * the full size's, checked every 50 steps on 30 calibration instances, at most 500 steps.
 */
export const BENCH_FAST: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [
    { ...PLAN_PATH, roles: SHORT },
    // The program, `console.log(solve(`…`))` with 4 rows copied, is 35 characters.
    { ...SUDOKU, env: { blanks: 2 }, maxTurns: 1, roles: { ...SHORT, tool: { maxNewTokens: 48 } } },
    // A 6×6 room's program, `console.log(solve(`…`))`, is 63 characters and its moves up to 11 letters: the planner
    // keeps the workflow's 48 tokens.
    { ...SOKOBAN, roles: { tool: { maxNewTokens: 72 } } },
    CODING,
    { ...MATH_TOOL, roles: { tool: { maxNewTokens: 24 }, reasoner: { maxNewTokens: 24 } } },
  ],
  steps: 6,
  instancesPerStep: 2,
  heldOut: 30,
  agent: { hidden: 48, layers: 1, heads: 4 },
  warmStart: { steps: 500, rows: 1000, batchSize: 16, lr: 5e-3, band: { ...BAND, every: 50, instances: 30 } },
};

/** --tiny: seconds; checks the pipeline end to end (a band the 2-step warm starts do not reach: the miss path, twice). */
export const BENCH_TINY: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [
    { ...PLAN_PATH, groupSize: 2 },
    { ...MATH_TOOL, groupSize: 2, roles: { tool: { maxNewTokens: 16 }, reasoner: { maxNewTokens: 16 } } },
  ],
  steps: 1,
  instancesPerStep: 1,
  heldOut: 3,
  agent: { hidden: 32, layers: 1, heads: 2 },
  warmStart: { steps: 2, rows: 32, batchSize: 4, band: { ...BAND, every: 1, instances: 2, attempts: 2 } },
};
