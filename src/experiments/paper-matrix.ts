/**
 * The run matrix of `hacrl bench paper` (the paper's Table 1 and Figure 4 in miniature): for each zoo pair, every
 * method and ablation, and every seed; plus the learning-rate sweep each method's rate is chosen by. A run is named
 * by its id, so a finished one is recognised and skipped when the bench is started again.
 */
import type { PairName } from '../zoo/recipes.js';

/** How a method trains: not at all, each agent alone, or both agents together. */
export type MethodKind = 'base' | 'solo' | 'pair';

/** One column of the table. */
export interface Method {
  /** Column name, e.g. 'gspo-x2' or 'hacpo-alpha0'. */
  name: string;
  kind: MethodKind;
  /** Raw run-config values over the common ones (preset, algorithm, hacpo switches, reward). */
  config: Record<string, unknown>;
  /** Method whose swept learning rate this one uses (ablations use HACPO's); absent: swept itself (or base). */
  lrFrom?: string;
  /** The rollout budget per step, as the paper accounts it (B prompts, G responses per prompt). */
  budget: string;
}

/** The random-reward control's reward module (compiled next to this file). */
export const RANDOM_REWARD_MODULE = new URL('./random-reward.js', import.meta.url).pathname;

const hacpo = (name: string, hacpoSection: Record<string, unknown>): Method => ({
  name,
  kind: 'pair',
  config: { algorithm: 'hacpo', hacpo: hacpoSection },
  lrFrom: 'hacpo',
  budget: 'each agent generates B·G, trains on 2·B·G',
});

/**
 * Variants of the capability-aware baseline (`hacpo.baseline`), each swept over the rates itself so that they are
 * compared on the validation split at their own best rate; `--methods` can name them. The one chosen on validation
 * alone (CHOSEN_VARIANT) is also in METHODS.
 */
export const BASELINE_CANDIDATES: readonly Method[] = (['blend', 'per-question', 'clamped'] as const).map((b) => ({
  ...hacpo(`hacpo-${b}`, { baseline: b }),
  lrFrom: undefined,
}));

/**
 * The baseline variant chosen on the validation split alone (docs/paper-miniature.md, "Choosing a baseline variant"):
 * the highest mean validation accuracy of the state pair's two agents at its own best rate, --fast sizes, seed 0.
 */
export const CHOSEN_VARIANT = 'hacpo-per-question';

/**
 * The headline methods (Table 1) followed by the ablations (Figure 4), the random-reward control and the chosen
 * baseline variant.
 */
export const METHODS: readonly Method[] = [
  { name: 'base', kind: 'base', config: {}, budget: 'no training' },
  {
    name: 'grpo',
    kind: 'solo',
    config: { preset: 'grpo-dapo', algorithm: 'grpo' },
    budget: 'B·G, trains on B·G',
  },
  { name: 'gspo', kind: 'solo', config: { algorithm: 'gspo' }, budget: 'B·G, trains on B·G' },
  {
    name: 'gspo-x2',
    kind: 'solo',
    config: { preset: 'gspo-x2', algorithm: 'gspo' },
    budget: 'B·2G (as many rollouts as the pair), trains on B·2G',
  },
  {
    name: 'naive',
    kind: 'pair',
    config: { algorithm: 'naive' },
    budget: 'each agent generates B·G, trains on 2·B·G',
  },
  { ...hacpo('hacpo', {}), lrFrom: undefined },
  hacpo('hacpo-no-baseline', { capabilityBaseline: false }),
  hacpo('hacpo-no-coefficient', { discrepancyCoefficient: false }),
  hacpo('hacpo-alpha0', { alpha: 0 }),
  hacpo('hacpo-alpha2', { alpha: 2 }),
  hacpo('hacpo-alpha3', { alpha: 3 }),
  hacpo('hacpo-no-stepwise', { deltaStep: 0 }),
  hacpo('hacpo-no-clip', { foreignSurrogate: 'hacpo-foreign-unclipped' }),
  hacpo('hacpo-char-ratio', { ratioNormalization: 'char' }),
  {
    ...hacpo('hacpo-random-reward', {}),
    config: {
      algorithm: 'hacpo',
      reward: { math: 0, custom: [{ name: 'random', path: RANDOM_REWARD_MODULE, weight: 1 }] },
    },
  },
  BASELINE_CANDIDATES.find((m) => m.name === CHOSEN_VARIANT)!,
];

/** The methods whose learning rate is swept (every method that trains and does not borrow another's rate). */
export function sweptMethods(methods: readonly Method[] = METHODS): Method[] {
  return methods.filter((m) => m.kind !== 'base' && m.lrFrom === undefined);
}

/** The method named `name` (of METHODS and BASELINE_CANDIDATES by default), or an error listing them. */
export function methodOf(name: string, methods: readonly Method[] = allMethods()): Method {
  const m = methods.find((x) => x.name === name);
  if (m === undefined) throw new Error(`unknown method "${name}"; known: ${methods.map((x) => x.name).join(', ')}`);
  return m;
}

/** METHODS, then the candidates that are not among them. */
export function allMethods(): Method[] {
  return [...METHODS, ...BASELINE_CANDIDATES.filter((c) => !METHODS.some((m) => m.name === c.name))];
}

/** What the command line may change in a mode's plan. */
export interface PlanOverrides {
  /** Only this pair. */
  only?: string;
  /** Only these methods (names of methodOf), in this order. */
  methods?: string[];
  /** RL steps per run. */
  steps?: number;
  /** Seeds of the test runs. */
  seeds?: number[];
}

/**
 * The plan of a mode with the overrides applied. A method that borrows another's rate needs that one in the list
 * (its sweep picks the rate).
 */
export function overridePlan(plan: BenchPlan, o: PlanOverrides, pairs: readonly PairName[]): BenchPlan {
  const out = { ...plan };
  if (o.only !== undefined) {
    if (!pairs.includes(o.only as PairName))
      throw new Error(`--only: unknown pair "${o.only}"; known: ${pairs.join(', ')}`);
    out.pairs = [o.only as PairName];
  }
  if (o.methods !== undefined) {
    out.methods = o.methods.map((n) => methodOf(n));
    for (const m of out.methods)
      if (m.lrFrom !== undefined && !o.methods.includes(m.lrFrom))
        throw new Error(`--methods: ${m.name} uses the rate swept for ${m.lrFrom}; add ${m.lrFrom} to the list`);
  }
  if (o.steps !== undefined) {
    if (!(Number.isInteger(o.steps) && o.steps >= 1))
      throw new Error(`--steps must be a positive integer, got ${o.steps}`);
    out.steps = o.steps;
  }
  if (o.seeds !== undefined) {
    if (o.seeds.length === 0 || o.seeds.some((s) => !(Number.isInteger(s) && s >= 1)))
      throw new Error(`--seeds must be positive integers (seed 0 is the sweep's), got ${o.seeds.join(',')}`);
    out.seeds = o.seeds;
  }
  return out;
}

/** Sizes of one bench mode. */
export interface BenchPlan {
  /** Mode name: full, fast or test. */
  mode: 'full' | 'fast' | 'test';
  pairs: PairName[];
  /** Seeds of the test runs (the sweep uses seed 0, never one of these). */
  seeds: number[];
  /** RL steps per run. */
  steps: number;
  /** Prompts per step (B) and responses per prompt (G). */
  prompts: number;
  groupSize: number;
  /** Learning rates tried by the sweep. */
  lrCandidates: number[];
  /** Validation problems (in-distribution, disjoint from the test problems) the sweep picks by. */
  validationN: number;
  /** Held-out problems per test split (in-distribution and out-of-distribution). */
  testN: number;
  /** Methods run (all by default). */
  methods: readonly Method[];
}

/** The three modes: full (the headline table), fast (one pair, 3 seeds, fewer steps), test (seconds, for CI). */
export function benchPlan(mode: BenchPlan['mode']): BenchPlan {
  const lrCandidates = [1e-5, 3e-5, 1e-4];
  if (mode === 'full')
    return {
      mode,
      pairs: ['state', 'size', 'model'],
      seeds: [1, 2, 3, 4, 5],
      steps: 20,
      prompts: 16,
      groupSize: 8,
      // One more rate than --fast: its HACPO sweep picked the largest candidate (1e-4), so the optimum may lie above.
      lrCandidates: [...lrCandidates, 3e-4],
      // The 'easy' test distribution holds about 2,450 distinct problems: 400 + 2,000 fit, 500 + 2,000 do not.
      validationN: 400,
      testN: 2000,
      methods: METHODS,
    };
  if (mode === 'fast')
    return {
      mode,
      pairs: ['size'],
      seeds: [1, 2, 3],
      steps: 10,
      prompts: 16,
      groupSize: 8,
      lrCandidates,
      validationN: 300,
      testN: 2000,
      methods: METHODS,
    };
  return {
    mode,
    pairs: ['tiny'],
    seeds: [1, 2],
    steps: 1,
    prompts: 2,
    groupSize: 2,
    lrCandidates: [1e-4, 1e-3],
    validationN: 4,
    testN: 6,
    methods: METHODS,
  };
}

/** One run of the matrix: a sweep run (on validation, seed 0) or a test run (on the test splits). */
export interface PlannedRun {
  /** Unique and stable: `<phase>-<pair>-<method>[-<agent>]-s<seed>[-lr<lr>]`. */
  id: string;
  phase: 'sweep' | 'test';
  pair: PairName;
  method: Method;
  /** For a solo method: the one agent trained; for pair and base: null. */
  agent: string | null;
  seed: number;
  /** Learning rate for a sweep run; for a test run it is resolved from the sweep when the run starts. */
  lr: number | null;
}

/** The sweep runs, then the test runs, in the order they are executed. */
export function planRuns(plan: BenchPlan, agentsOf: (pair: PairName) => string[]): PlannedRun[] {
  const out: PlannedRun[] = [];
  const variants = (pair: PairName, m: Method): (string | null)[] => (m.kind === 'solo' ? agentsOf(pair) : [null]);
  const tag = (pair: PairName, m: Method, agent: string | null) => `${pair}-${m.name}${agent ? `-${agent}` : ''}`;
  for (const pair of plan.pairs)
    for (const m of sweptMethods(plan.methods))
      for (const agent of variants(pair, m))
        for (const lr of plan.lrCandidates)
          out.push({
            id: `sweep-${tag(pair, m, agent)}-s0-lr${lr}`,
            phase: 'sweep',
            pair,
            method: m,
            agent,
            seed: 0,
            lr,
          });
  for (const pair of plan.pairs)
    for (const seed of plan.seeds)
      for (const m of plan.methods)
        for (const agent of variants(pair, m)) {
          // The base agents do not depend on the seed: one evaluation serves every seed.
          if (m.kind === 'base' && seed !== plan.seeds[0]) continue;
          out.push({
            id: `test-${tag(pair, m, agent)}-s${seed}`,
            phase: 'test',
            pair,
            method: m,
            agent,
            seed,
            lr: null,
          });
        }
  return out;
}
