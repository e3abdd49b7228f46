/** The sizes of `hacrl bench mas`: full, --fast (about 20 minutes on a quiet 2-core machine) and --tiny (tests). */
import { SOKOBAN_BENCH } from '../envs/sokoban.js';
import type { BenchMasOptions } from './mas.js';

/** Plan-Path 4×4, 2 turns: small enough that warm-started small agents start with signal. */
const PLAN_PATH = {
  name: 'plan-path',
  env: { height: 4, width: 4, wallProb: 0.1, maxShortest: 3 },
  maxTurns: 2,
  groupSize: 4,
};
/** Short answers: a move list or a 4×4 grid needs fewer than 24 tokens. */
const SHORT = { tool: { maxNewTokens: 24 }, planner: { maxNewTokens: 24 } };
const SUDOKU = { name: 'sudoku', env: { blanks: 3 }, maxTurns: 2, groupSize: 4 };

/** Plan-Path 5×5 for the full size: a 3,000-step warm start leaves the code workflow at 50% greedy, room for RL. */
const PLAN_PATH_5 = {
  ...PLAN_PATH,
  env: { height: 5, width: 5, wallProb: 0.15, maxShortest: 4 },
  toolMode: 'code',
  // Every group trains: with the 50% low-mean drop on, RL at lr 3e-4 lowered greedy success on calibration.
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * Sokoban with rooms that need 3 or 4 pushes (SOKOBAN_BENCH), 2 turns, the tool agent proposing a move list (text: the
 * sandbox has no Sokoban routine to call); RL as Plan-Path's (group filter off). SOKOBAN_CALIBRATION
 */
const SOKOBAN = {
  name: 'sokoban',
  env: SOKOBAN_BENCH,
  maxTurns: 2,
  groupSize: 4,
  groupFilter: { lowMeanRatio: 0 },
};

/**
 * The coding workflow (tester, then coder), one turn: with two turns and no detours the warm start never shows a
 * second turn and second-turn responses were unreadable (docs/coding-workflow.md). RL as Plan-Path's (group filter off).
 */
const CODING = { name: 'coding', maxTurns: 1, groupSize: 4, groupFilter: { lowMeanRatio: 0 } };

/**
 * The coding warm start: 1,000 steps on 16,000 solver rows (each once), no detours, on the bench's 64×2 agent (about
 * 0.1M parameters). Chosen on 100 calibration instances (seeds from 1.8·10⁹, test-side tasks; docs/coding-workflow.md):
 * 31% greedy, coder hidden pass rate 0.34 — inside the 10–40% band; 1,500 steps gave 42%, 600 steps with 2 turns 7%.
 */
const CODING_WARM_START = { steps: 1000, rows: 16_000, batchSize: 16, detour: 0 };

/**
 * Full size. Plan-Path 5×5 (2 turns) with the tool agent writing a program that calls the sandbox's path-finding
 * routine on the grid it copies from its observation (src/envs/plan-path.ts), 64×2 agents. Chosen on calibration
 * instances (seeds from 1.8·10⁹, disjoint from the held-out ones; docs/at-grpo.md), never on held-out:
 * - the warm start sees each of 48,000 solver rows once (3,000 steps of 16) with detours (half of the applied actions
 *   before the last turn are another instance's), leaving the workflow at 50% greedy on 400 calibration instances
 *   (the same warm start on 4×4: 100%, nothing for RL to raise; on 6×6 with walls 0.2: 4%);
 * - advantages only centred (Dr. GRPO): with Plan-Path's dense shaping, dividing by a group's std turns differences of
 *   0.02 between failed candidates into full-size advantages;
 * - lr 3e-4, 80 steps of 16 instances, group filter off: 50 → 69% and 52% greedy (shared, RL seeds 0 and 1), 66.5%
 *   (per-role); lr 1e-4 with the default filter: 51%. On 4×4 every RL setting lowered greedy success.
 */
export const BENCH_FULL: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [PLAN_PATH_5, SUDOKU, SOKOBAN, CODING],
  perWorkflow: { coding: { warmStart: CODING_WARM_START } },
  steps: 80,
  instancesPerStep: 16,
  heldOut: 100,
  lr: 3e-4,
  advantage: 'none',
  agent: { hidden: 64, layers: 2, heads: 4 },
  warmStart: { steps: 3000, rows: 48_000, batchSize: 16, detour: 0.5 },
};

/**
 * --fast: tiny agents and short training, so that every family fits a busy machine: it checks each family's pipeline
 * end to end (rooms, sandbox, warm starts, arms); its numbers are not the claim (the full size is).
 */
export const BENCH_FAST: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [
    { ...PLAN_PATH, roles: SHORT },
    { ...SUDOKU, env: { blanks: 2 }, maxTurns: 1, roles: SHORT },
    { ...SOKOBAN, roles: SHORT },
    CODING,
  ],
  steps: 6,
  instancesPerStep: 2,
  heldOut: 30,
  agent: { hidden: 48, layers: 1, heads: 4 },
  warmStart: { steps: 250, rows: 1000, batchSize: 16, lr: 5e-3 },
};

/** --tiny: seconds; checks the pipeline end to end. */
export const BENCH_TINY: Omit<BenchMasOptions, 'workDir'> = {
  workflows: [{ ...PLAN_PATH, groupSize: 2 }],
  steps: 1,
  instancesPerStep: 1,
  heldOut: 3,
  agent: { hidden: 32, layers: 1, heads: 2 },
  warmStart: { steps: 2, rows: 32, batchSize: 4 },
};
