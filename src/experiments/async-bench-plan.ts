/**
 * What `hacrl bench async` runs: the exchange settings (lockstep, async with a bound, free-running, naive sharing,
 * each agent alone), the agents of each mode (the zoo's size pair, a swarm of four zoo agents, the real Hub shapes or
 * the test-sized pair) and the comparisons its tables make. Pure data: the runs themselves are in async-bench.ts.
 */

/** One exchange setting: how the agents of a run share rollouts. */
export interface AsyncSetting {
  /** Row name in the tables, e.g. 'async-2' or 'naive-lockstep'. */
  name: string;
  /** exchange.mode; ignored when `alone`. */
  mode: 'lockstep' | 'async';
  /** exchange.maxAhead = exchange.maxStaleness, in steps (async only). */
  bound?: number;
  /** The algorithm every agent trains with. */
  algorithm: 'hacpo' | 'naive' | 'grpo';
  /** Each agent trains by itself (`hacrl train` on a one-agent config, the same steps and prompts); default false. */
  alone?: boolean;
}

/** Which agents a mode runs. */
export type AsyncBenchMode = 'pair' | 'real' | 'swarm' | 'test';

/** One mode's plan. */
export interface AsyncBenchPlan {
  mode: AsyncBenchMode;
  settings: AsyncSetting[];
  /** Seeds of the runs (the run's seed: data order and sampling). */
  seeds: number[];
  /** RL steps per agent. */
  steps: number;
  /** Prompts per step (B) and responses per prompt and agent (G). */
  prompts: number;
  groupSize: number;
  /** Longest response, in tokens. */
  maxNewTokens: number;
  /** Peak learning rate of every agent. */
  lr: number;
  /** Held-out problems greedy accuracy is measured on (0: none, as with random weights). */
  evalN: number;
  /** Pairs of settings the tables difference, [setting, against], paired by seed. */
  comparisons: [string, string][];
}

/** Free-running async: a bound no run of the bench reaches, so the fast agent never waits. */
export const FREE_RUNNING = 1000;

const lockstep: AsyncSetting = { name: 'lockstep', mode: 'lockstep', algorithm: 'hacpo' };
const bounded = (bound: number, algorithm: 'hacpo' | 'naive' = 'hacpo'): AsyncSetting => ({
  name: `${algorithm === 'naive' ? 'naive-' : ''}async-${bound === FREE_RUNNING ? 'free' : bound}`,
  mode: 'async',
  bound,
  algorithm,
});
const versusLockstep = (settings: readonly AsyncSetting[]): [string, string][] =>
  settings.filter((s) => s.name !== 'lockstep').map((s) => [s.name, 'lockstep']);

/** The plan of `mode` with the CLI's overrides (seeds as a count, steps, held-out problems). */
export function asyncBenchPlan(
  mode: AsyncBenchMode,
  o: { seeds?: number; steps?: number; evalN?: number } = {},
): AsyncBenchPlan {
  const seeds = (n: number) => Array.from({ length: o.seeds ?? n }, (_, i) => i + 1);
  // The demo's rollout shape on the zoo's agents: B = 16 prompts × G = 8, the zoo's 96 new tokens.
  const zoo = { prompts: 16, groupSize: 8, maxNewTokens: 96, lr: 1e-4, evalN: o.evalN ?? 200 };
  switch (mode) {
    case 'pair': {
      const settings = [lockstep, bounded(1), bounded(2), bounded(4), bounded(FREE_RUNNING)];
      // 40 steps: about 80 s of the large agent on one quiet core (2.0 CPU-seconds a step at B = 16 × G = 8).
      return { mode, settings, seeds: seeds(5), steps: o.steps ?? 40, ...zoo, comparisons: versusLockstep(settings) };
    }
    case 'swarm': {
      const settings: AsyncSetting[] = [
        lockstep,
        bounded(2),
        { name: 'naive-lockstep', mode: 'lockstep', algorithm: 'naive' },
        bounded(2, 'naive'),
        { name: 'alone', mode: 'lockstep', algorithm: 'grpo', alone: true },
      ];
      const comparisons: [string, string][] = [
        ['lockstep', 'alone'],
        ['async-2', 'alone'],
        ['lockstep', 'naive-lockstep'],
        ['async-2', 'naive-async-2'],
        ['async-2', 'lockstep'],
      ];
      // Two agents share each core: 30 steps are about as long as the pair's 40.
      return { mode, settings, seeds: seeds(3), steps: o.steps ?? 30, ...zoo, comparisons };
    }
    case 'real': {
      const settings = [lockstep, bounded(2)];
      // Random weights: accuracy means nothing, so none is measured.
      const shape = { prompts: 1, groupSize: 4, maxNewTokens: 32, lr: 1e-4, evalN: 0 };
      return { mode, settings, seeds: seeds(1), steps: o.steps ?? 3, ...shape, comparisons: versusLockstep(settings) };
    }
    case 'test': {
      const settings = [lockstep, bounded(2)];
      const shape = { prompts: 2, groupSize: 4, maxNewTokens: 24, lr: 1e-3, evalN: o.evalN ?? 12 };
      return { mode, settings, seeds: seeds(1), steps: o.steps ?? 3, ...shape, comparisons: versusLockstep(settings) };
    }
  }
}
