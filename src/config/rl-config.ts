/**
 * The configuration of an RL run: one zod schema with defaults and a one-line doc per field (what `hacrl config
 * schema` prints) and the per-agent view the trainer uses; the cross-field checks (rl-config-checks.ts) join it where
 * a config is parsed (load-config.ts).
 * Agents are a list so that multi-agent algorithms (HACPO) add per-agent settings without reshaping the file.
 */
import { z } from 'zod';
import { DEFAULT_QUESTION_TEMPLATE } from '../tasks/prompt.js';
import { DEFAULT_STEPWISE_CLIP } from '../algorithms/hacpo/stepwise-clip.js';
import { RATIO_NORMALIZATIONS } from '../algorithms/hacpo/ratio-normalization.js';
import { DEFAULT_BASELINE, HACPO_BASELINES, HACPO_BASELINE_SUMMARIES } from '../algorithms/hacpo/baseline.js';
import { ADVANTAGE_ESTIMATORS, ADVANTAGE_ESTIMATOR_NAMES } from '../algorithms/advantages.js';
import { LOSS_AGGREGATIONS } from '../algorithms/aggregate.js';
import { KL_ESTIMATORS } from '../algorithms/kl.js';
import {
  OLD_LOG_PROB_SOURCES,
  ROLLOUT_CORRECTION_LEVELS,
  ROLLOUT_CORRECTIONS,
} from '../algorithms/rollout-correction.js';
import { ALGORITHM_RECIPES, ALGORITHMS, VARIANTS, type Recipe } from '../algorithms/recipes.js';
import { FOREIGN_SURROGATES, OWN_SURROGATES, SURROGATES } from '../algorithms/surrogates.js';
import { WorkflowConfigSchema } from '../workflows/workflow-config.js';
import { ALL_LINEAR, LORA_TARGET_NAMES } from '../model/lora.js';
import { PRECISIONS, type Precision } from '../tensor/bf16.js';
import { defaultsByAlgorithm, describeVariants } from './recipe-defaults.js';

/** A schema with its default and doc, kept together so that the doc always states the real default. */
interface Field<T extends z.ZodType> {
  schema: T;
  value: NoUndefined<z.output<T>>;
  doc: string;
  /** How the doc states the default when it is not just the value (a recipe-owned setting). */
  defaultDoc?: string;
}
type NoUndefined<T> = T extends undefined ? never : T;
type AnyField = Field<z.ZodType>;

function field<T extends z.ZodType>(schema: T, value: NoUndefined<z.output<T>>, doc: string): Field<T> {
  return { schema, value, doc };
}

/** The field with its default applied; the description ends with "; default VALUE". */
function withDefault<T extends z.ZodType>(f: Field<T>): z.ZodDefault<T> {
  return f.schema.default(f.value).describe(`${f.doc}; default ${f.defaultDoc ?? JSON.stringify(f.value)}`);
}

/**
 * A field whose default the algorithm's recipe sets (src/algorithms/recipes.ts): the schema's own default is grpo's
 * (the default algorithm), and the doc lists every algorithm's.
 */
function recipeField<T extends z.ZodType>(
  schema: T,
  pick: (r: Recipe) => NoUndefined<z.output<T>> | undefined,
  doc: string,
): Field<T> {
  // A HACPO-only setting has no grpo value: the hacpo recipe's is the schema's default then.
  const value = pick(ALGORITHM_RECIPES.grpo) ?? pick(ALGORITHM_RECIPES.hacpo)!;
  return { ...field(schema, value, doc), defaultDoc: `per algorithm: ${defaultsByAlgorithm(pick)}` };
}

function defaults<F extends Record<string, AnyField>>(fields: F): { [K in keyof F]: z.ZodDefault<F[K]['schema']> } {
  return Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, withDefault(f)])) as {
    [K in keyof F]: z.ZodDefault<F[K]['schema']>;
  };
}

// Per-agent variants of shared settings: optional, and when absent the run-wide value (at `from`) applies.
function inherited<F extends Record<string, AnyField>>(
  fields: F,
  from: string,
): { [K in keyof F]: z.ZodOptional<F[K]['schema']> } {
  return Object.fromEntries(
    Object.entries(fields).map(([k, f]) => [k, f.schema.optional().describe(`${f.doc}; default ${from}.${k}`)]),
  ) as { [K in keyof F]: z.ZodOptional<F[K]['schema']> };
}

/** A config section: strict (unknown keys refused) and filled with its defaults when left out. */
function section<S extends z.ZodRawShape>(shape: S, doc: string) {
  const obj = z.strictObject(shape);
  // Every field of a section is defaulted or optional, so {} is valid input; TypeScript cannot see that generically.
  return obj.prefault({} as z.input<typeof obj>).describe(doc);
}

/** "a: what a is; b: …" for a registry's names (the docs of a field whose values are registry names). */
const describe = (names: readonly string[], registry: Record<string, { summary: string }>): string =>
  names.map((n) => `${n}: ${registry[n]!.summary}`).join('; ');

/** A fraction in [0, 1]. */
const unitInterval = z.number().min(0).max(1);
const count = (min: number, why?: string) =>
  z
    .number()
    .int('must be a whole number')
    .min(min, why ?? `must be at least ${min}`);

/** How completions are sampled: run-wide in `rollout`, overridable per agent. */
const SAMPLING = {
  temperature: field(z.number().min(0), 1, 'Sampling temperature (0 = greedy)'),
  topP: field(
    z.number().gt(0).max(1),
    1,
    'Nucleus sampling: keep the likeliest tokens up to this probability (1 = off)',
  ),
  topK: field(count(0), 0, 'Keep only the K likeliest tokens (0 = off)'),
  maxNewTokens: field(
    count(1).max(32_768, 'must be at most 32768 (each step keeps every completion and its key/value cache in memory)'),
    128,
    'Longest completion in tokens; longer ones are cut (truncated)',
  ),
  stopStrings: field(z.array(z.string().min(1)), [], 'Strings that end a completion (the text is cut before them)'),
};

/** How a question becomes a prompt: run-wide in `data`, overridable per agent (each renders its own prompt). */
const PROMPT = {
  template: field(z.string(), DEFAULT_QUESTION_TEMPLATE, 'Question template with a {question} placeholder'),
};
const SYSTEM_DOC = 'System message of the prompt';
const GROUP_SIZE = field(
  count(1).max(1024, 'must be at most 1024 (a step holds promptsPerStep × groupSize sequences in memory)'),
  8,
  'Completions per prompt and agent (G)',
);

/** The HACPO knobs an agent may set for itself (HACRL §3.3–3.4): run-wide in `hacpo`, overridable per agent. */
const HACPO_PER_AGENT = {
  alpha: recipeField(
    z.number().min(0),
    (r) => r.hacpo?.alpha,
    'Exponential importance sampling: foreign ratios are weighted by sg(s)^α (Eq. 12; 0 = off)',
  ),
  delta: field(
    z.number().gt(0).lt(1),
    DEFAULT_STEPWISE_CLIP.delta,
    'δ: foreign ratios below 1 − δ are clipped out of the loss (Eq. 13)',
  ),
  deltaStep: field(
    z.number().min(0),
    DEFAULT_STEPWISE_CLIP.deltaStep,
    'δ_step: the foreign lower bound rises by this per optimizer update within a step (Eq. 14; 0 = fixed)',
  ),
  ratioNormalization: field(
    z.enum(RATIO_NORMALIZATIONS),
    'token',
    "Cross-agent ratio per token of each side ('token', Eq. 11) or per character of the response ('char': a " +
      'character- and a BPE agent differ in tokens per text, so per token the band admits foreign samples by ' +
      'tokenizer granularity, spec §7)',
  ),
  order: field(
    z.enum(['shuffled', 'own-first']),
    'shuffled',
    "How a learner's own and foreign samples fill its mini-batches: shuffled together (the paper) or own first",
  ),
};
const LR = field(z.number().positive(), 1e-4, 'Peak learning rate of AdamW (small models here need more than 1e-6)');

/** LoRA adapters of an agent (PEFT's r, lora_alpha, lora_dropout, target_modules); docs/learner-pipeline.md. */
const LoraConfigSchema = z.strictObject(
  defaults({
    rank: field(count(1), 16, "r: the adapters' inner dimension (at most the smaller width of each projection)"),
    alpha: field(z.number().positive(), 32, 'lora_alpha: the update is scaled by alpha / rank'),
    dropout: field(
      z.number().min(0).lt(1, 'must be below 1'),
      0,
      'lora_dropout: probability of zeroing an input of the adapter path in training (seeded, resumed exactly)',
    ),
    targets: field(
      z
        .array(
          z.enum([...LORA_TARGET_NAMES, ALL_LINEAR], {
            error: `use projection names ${LORA_TARGET_NAMES.join(', ')}, or '${ALL_LINEAR}'`,
          }),
        )
        .min(1, `list at least one projection, or '${ALL_LINEAR}'`)
        .refine((t) => new Set(t).size === t.length, 'list each projection once')
        .refine((t) => !t.includes(ALL_LINEAR) || t.length === 1, `'${ALL_LINEAR}' stands alone`),
      [ALL_LINEAR],
      `Adapted projections by PEFT name: ${LORA_TARGET_NAMES.slice(0, 7).join(', ')} (Llama, Qwen2, Qwen3) or ` +
        `${LORA_TARGET_NAMES.slice(7).join(', ')} (GPT-2); ['${ALL_LINEAR}']: every projection of the blocks`,
    ),
  }),
);
/** An agent's LoRA settings with defaults filled in. */
export type LoraConfig = z.output<typeof LoraConfigSchema>;

/** Valid agent names: they become folder names in checkpoints. */
export const AGENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** One agent: where it starts from and its own settings (absent ones inherit the run-wide value). */
export const AgentConfigSchema = z.strictObject({
  name: z
    .string()
    .regex(
      AGENT_NAME,
      'agent names become folder names: use letters, digits, ".", "_" and "-", starting with a letter or digit',
    )
    .describe('Agent name, unique in the run (folder and metric names); required'),
  checkpoint: z
    .string()
    .min(1, 'give the folder of the agent checkpoint')
    .describe('Starting checkpoint folder (config.json, model.safetensors, tokenizer files); required'),
  lr: LR.schema.optional().describe(`${LR.doc}; default optim.lr`),
  groupSize: GROUP_SIZE.schema.optional().describe(`${GROUP_SIZE.doc}; default rollout.groupSize`),
  ...inherited(SAMPLING, 'rollout'),
  ...inherited(HACPO_PER_AGENT, 'hacpo'),
  ...inherited(PROMPT, 'data'),
  system: z.string().optional().describe(`${SYSTEM_DOC}; default data.system`),
  lora: LoraConfigSchema.optional().describe(
    'Train LoRA adapters on the frozen checkpoint instead of every weight (saved in PEFT format); default none',
  ),
  precision: z
    .enum(PRECISIONS, { error: `use ${PRECISIONS.join(' or ')}` })
    .optional()
    .describe(
      "Products of the projections and the head: 'fp32', or 'bf16' (operands rounded to bfloat16, fp32 " +
        'accumulation, fp32 master weights and AdamW state; a frozen base and the KL reference kept as bfloat16; ' +
        'docs/real-models.md); default fp32',
    ),
});

export const RunConfigObject = z.strictObject({
  algorithm: withDefault(
    field(
      z.enum(ALGORITHMS),
      'grpo',
      'Algorithm, whose recipe fills the settings you leave out (grpo and gspo train each agent alone; hacpo and ' +
        `naive need 2 or more agents) — ${ALGORITHMS.map((a) => `${a}: ${ALGORITHM_RECIPES[a].summary}`).join('; ')}`,
    ),
  ),
  preset: z
    .enum(VARIANTS)
    .optional()
    .describe(
      `Named variant of an algorithm whose recipe replaces the algorithm's — ${describeVariants()}; default none`,
    ),
  agents: z
    .array(AgentConfigSchema)
    .min(1, 'list at least one agent: agents: [{ name: a, checkpoint: path/to/folder }]')
    .describe('Agents trained in the run (at least 1; hacpo and naive need 2 or more); all answer the same prompts'),
  data: section(
    {
      ...defaults({
        train: field(
          z.string().min(1),
          'easy:train:2000',
          'Training problems: a JSONL file or a spec NAME:SPLIT:N:SEED',
        ),
        validation: field(z.array(z.string().min(1)), ['easy:test:200'], 'Validation data sets (files or specs)'),
        ...PROMPT,
      }),
      system: z.string().optional().describe(`${SYSTEM_DOC}; default none`),
      date: z
        .string()
        .regex(/^\d{4}-\d{2}-\d{2}$/, 'give the date as YYYY-MM-DD')
        .optional()
        .describe(
          'The date chat templates read (strftime_now: Llama 3.2 writes it into every prompt), YYYY-MM-DD, the same ' +
            "for the whole run; default the run's start date, written into the run's saved config (a resume and " +
            'each `hacrl agent` process read it there)',
        ),
    },
    'Training and validation data and the prompt layout',
  ),
  rollout: section(
    defaults({
      promptsPerStep: field(
        count(1).max(4096, 'must be at most 4096 (a step holds promptsPerStep × groupSize sequences in memory)'),
        8,
        'Prompts per step (B)',
      ),
      groupSize: GROUP_SIZE,
      ...SAMPLING,
    }),
    'Sampling of completions (per-agent settings in agents override these)',
  ),
  optim: section(
    defaults({
      surrogate: recipeField(
        z.enum(OWN_SURROGATES),
        (r) => r.surrogate,
        `Surrogate objective of own responses — ${describe(OWN_SURROGATES, SURROGATES)}`,
      ),
      miniBatches: recipeField(
        count(1),
        (r) => r.miniBatches,
        "Optimizer updates per epoch over the step's B·G rollouts (M; divides B·G)",
      ),
      epochs: field(count(1, 'must be at least 1: each step trains on its rollouts at least once'), 1, 'Epochs (E)'),
      lossAggregation: recipeField(
        z.enum(LOSS_AGGREGATIONS),
        (r) => r.aggregation,
        'Loss over a mini-batch: mean of all tokens, mean of per-sequence token means, or of per-sequence sums',
      ),
      clipLow: recipeField(z.number().gt(0).lt(1), (r) => r.clip.low, 'ε_low: the ratio is clipped below at 1 − ε_low'),
      clipHigh: recipeField(z.number().gt(0), (r) => r.clip.high, 'ε_high: the ratio is clipped above at 1 + ε_high'),
      dualClip: field(
        z.number().gt(1, 'must be greater than 1 (e.g. 3), or null for off').nullable(),
        null,
        'Dual clip c: a negative-advantage loss is bounded by c·|A| (null = off)',
      ),
      klEstimator: field(z.enum(KL_ESTIMATORS), 'k3', 'KL-to-reference estimator: k1 (log ratio), k3 (low variance)'),
      klCoef: field(z.number().min(0), 0, 'KL penalty coefficient (0 = off, and no reference model is kept)'),
      entropyCoef: field(
        z.number().min(0),
        0,
        'Entropy bonus β_H: the loss subtracts β_H × the mean entropy (nats) of the policy over own response tokens',
      ),
      advantage: recipeField(
        z.enum(ADVANTAGE_ESTIMATOR_NAMES),
        (r) => r.advantage,
        `Advantage estimator — ${describe(ADVANTAGE_ESTIMATOR_NAMES, ADVANTAGE_ESTIMATORS)}`,
      ),
      filterZeroVariance: field(z.boolean(), false, 'Leave groups whose rewards are all equal out of the loss'),
      maskTruncated: field(z.boolean(), false, 'Leave completions cut at maxNewTokens out of the loss'),
      oldLogProbs: field(
        z.enum(OLD_LOG_PROB_SOURCES),
        'learner',
        "Where π_old's log-probs come from: learner (a forward pass before the step's updates, so the first own " +
          'ratio is exactly 1) or sampler (the log-probs recorded while sampling: one forward pass fewer over every ' +
          "own response per step, the ratio then carries the sampler/learner mismatch; verl's bypass mode)",
      ),
      rolloutCorrection: field(
        z.enum(ROLLOUT_CORRECTIONS),
        'none',
        'Correct own responses for the sampler/learner log-prob mismatch, ρ = exp(learner old − sampler log-prob): ' +
          'tis weighs each term by min(ρ, cap), mask drops those with ρ outside [1/cap, cap] (docs/learner-pipeline.md)',
      ),
      rolloutCorrectionCap: field(
        z.number().gt(1, 'must be above 1 (e.g. 2)').finite(),
        2,
        'The rollout correction cap C: TIS truncates ρ at C; mask keeps 1/C ≤ ρ ≤ C',
      ),
      rolloutCorrectionLevel: field(
        z.enum(ROLLOUT_CORRECTION_LEVELS),
        'token',
        "One ρ per token, or per response (the geometric mean of its tokens'; needed by sequence-ratio surrogates)",
      ),
      lr: LR,
      schedule: field(z.enum(['constant', 'cosine', 'linear']), 'constant', 'Learning-rate shape after warm-up'),
      warmupSteps: field(count(0), 0, 'Steps of linear learning-rate warm-up (training steps, not updates)'),
      minLrRatio: field(z.number().min(0).max(1), 0, 'Final learning rate of cosine/linear decay, as a fraction of lr'),
      weightDecay: field(z.number().min(0), 0.01, 'AdamW decoupled weight decay (matrices only)'),
      gradClip: field(z.number().min(0), 1, 'Largest global gradient norm; larger gradients are scaled down (0 = off)'),
      activationCheckpointing: field(
        z.boolean(),
        false,
        "Keep only each transformer block's input during a training forward pass and recompute the block in the " +
          'backward: activation memory falls to about one block (hacrl plan shows how much), at one more forward ' +
          'pass of compute; the gradients are the same',
      ),
    }),
    'Policy optimisation: mini-batches, clipping, KL, advantages, optimizer and schedule',
  ),
  hacpo: section(
    defaults({
      capabilityWindow: field(count(1), 5, 'Steps K averaged in the capability estimate P̂ (Eq. 9)'),
      capabilityBaseline: recipeField(
        z.boolean(),
        (r) => r.hacpo?.capabilityBaseline,
        "Capability-aware advantage baseline (Eqs. 6–8); false: the plain mean of all agents' rewards",
      ),
      baseline: field(
        z.enum(HACPO_BASELINES),
        DEFAULT_BASELINE.kind,
        `Which capability-aware baseline μ̂ — ${describe(HACPO_BASELINES, HACPO_BASELINE_SUMMARIES)}`,
      ),
      omegaBand: field(
        z
          .tuple([z.number().gt(0).max(1), z.number().min(1)])
          .refine(([lo, hi]) => Number.isFinite(hi) && lo <= hi, 'omegaBand must be [low ≤ 1, finite high ≥ 1]'),
        [...DEFAULT_BASELINE.omegaBand] as [number, number],
        "[low, high] band of ω for baseline 'clamped' (dimensionless)",
      ),
      omegaPrior: field(
        z.number().min(0).finite(),
        DEFAULT_BASELINE.omegaPrior,
        "Pseudo-responses c shrinking the per-question ω toward the batch ratio (baseline 'per-question')",
      ),
      discrepancyCoefficient: recipeField(
        z.boolean(),
        (r) => r.hacpo?.discrepancyCoefficient,
        'Scale the advantage of a foreign response by ω = P̂_generator / P̂_learner (Eq. 10)',
      ),
      foreignSurrogate: recipeField(
        z.enum(FOREIGN_SURROGATES),
        (r) => r.hacpo?.foreignSurrogate,
        `Surrogate of foreign responses — ${describe(FOREIGN_SURROGATES, SURROGATES)}`,
      ),
      ...HACPO_PER_AGENT,
    }),
    "HACPO mechanisms (algorithms hacpo and naive; naive's recipe turns them all off): each switch is one ablation of the paper",
  ),
  reward: section(
    defaults({
      math: field(z.number(), 1, 'Weight of the math reward (1 when the last \\boxed{} answer equals the gold)'),
      format: field(z.number(), 0, 'Weight of the format reward (1 for exactly one closed \\boxed{})'),
      custom: field(
        z.array(
          z.strictObject({
            path: z.string().min(1).describe('JavaScript module with a default export or an export named reward'),
            weight: z.number().describe('Weight in the total reward'),
            name: z.string().min(1).optional().describe('Metric name; default the file name without extension'),
          }),
        ),
        [],
        'Reward modules of your own, each with a weight',
      ),
    }),
    'Rewards: the total is the weighted sum',
  ),
  workflow: WorkflowConfigSchema.optional().describe(
    'Multi-agent workflow trained by algorithm at-grpo: environment, roles → policies (agent names), tree sampling, ' +
      'group filter (docs/at-grpo.md); instances replace data.train and eval.problems held-out instances are ' +
      'validated; default none',
  ),
  reproducible: z
    .boolean()
    .optional()
    .describe(
      'Compute with the reproducible kernels (docs/reproducible.md): the same weights from the same seed on any CPU, ' +
        'thread count, BLAS library and backend, slower; default off, or on with `hacrl --reproducible` or ' +
        "HACRL_REPRODUCIBLE=1 (the value used is written into the run's saved config, and a resume follows it)",
    ),
  ...defaults({
    steps: field(count(1), 100, 'Training steps (each: B prompts, rollouts, M·E optimizer updates per agent)'),
    seed: field(z.number().int(), 0, 'Seed of every random choice (data order, sampling, mini-batches)'),
  }),
  eval: section(
    defaults({
      every: field(count(0), 10, 'Steps between validation runs (0 = only after the last step)'),
      problems: field(count(0), 200, 'Problems per validation data set, the first ones (0 = all)'),
      samplesPerProblem: field(count(0), 0, 'Samples per problem for avg@k and pass@k (0 = greedy only)'),
      atStart: field(
        z.boolean(),
        true,
        'Validate the base model before the first update (logged as step 0); a resumed run does not repeat it',
      ),
    }),
    'Validation during training',
  ),
  logging: section(
    defaults({
      entropyFloor: field(z.number().min(0), 0.01, 'Entropy collapse: mean token entropy below this, nats (0 = off)'),
      entropyFraction: field(unitInterval, 0.1, 'Entropy collapse: below this fraction of the first entropy (0 = off)'),
      lengthFraction: field(z.number().min(0), 0.9, 'Length blow-up: mean length ≥ this × maxNewTokens (0 = off)'),
      truncatedFraction: field(unitInterval, 0.5, 'Length blow-up: ≥ this fraction of responses truncated (0 = off)'),
    }),
    'Training-health warnings per agent, each printed once with its step and recorded as agent/NAME/warn/<kind> = 1',
  ),
  checkpoint: section(
    defaults({
      every: field(count(0), 50, 'Steps between checkpoints (0 = only after the last step)'),
      keepLast: field(count(1, 'must be at least 1: resuming needs a checkpoint'), 3, 'Checkpoints kept (oldest go)'),
    }),
    'Checkpoints for resuming',
  ),
  exchange: section(
    {
      ...defaults({
        broker: field(
          z.string().min(1),
          'nats://127.0.0.1:4222',
          'NATS server address (hacrl agent --broker overrides)',
        ),
        runId: field(
          z.string().regex(/^[A-Za-z0-9_-]*$/, 'use letters, digits, "_" and "-"'),
          '',
          "The run's name on the broker (stream, subjects, object store); empty: a hash of the rest of this config, " +
            'the same for every agent given the same file and overrides',
        ),
        waitSeconds: field(
          z.number().positive(),
          600,
          "Seconds an agent waits for another agent's records of a step, or for the broker, before onLate applies",
        ),
        onLate: field(
          z.enum(['stop', 'continue']),
          'stop',
          'A late agent: stop naming it and the step, or train this step without its records (logged; the run is ' +
            'then no longer equal to one process)',
        ),
        onBadRecord: field(
          z.enum(['stop', 'skip']),
          'stop',
          "A partner's step that fails the arrival checks (docs/distributed.md): stop naming the agent, step, field " +
            'and value, or train this step without that partner (logged; the run is then no longer equal to one process)',
        ),
        maxMessageBytes: field(
          count(1024),
          1048576,
          "Largest message on the stream, bytes (at most the server's max_payload); larger steps go through the Object Store",
        ),
        maxObjectBytes: field(count(1), 268435456, "Largest step of one agent's records, bytes; larger is refused"),
        mode: field(
          z.enum(['lockstep', 'async']),
          'lockstep',
          "lockstep: each step waits for every agent's records of the same step (equal to hacrl train); async: each " +
            "step trains on the agent's own rollouts plus the partner steps published since its last one, waiting " +
            'only when it runs maxAhead steps ahead (docs/distributed.md, "Agents that do not wait")',
        ),
        maxStaleness: field(
          count(0),
          4,
          'async: the oldest partner step a step may use, in steps behind it (t − s); older ones are counted as ' +
            'expired, never trained on; at least maxAhead',
        ),
        maxAhead: field(
          count(0),
          2,
          "async: steps an agent may run beyond the slowest live partner's last published step before it waits for " +
            'it (admission control: a slow partner is never starved); at most maxStaleness',
        ),
        maxStepsPerPartner: field(
          count(1),
          2,
          'async: partner steps one step consumes from each partner at most, oldest first (the rest wait for the next step)',
        ),
      }),
      user: z.string().min(1).optional().describe('User name on the broker (HACRL_NATS_USER overrides); default none'),
      passwordFile: z
        .string()
        .min(1)
        .optional()
        .describe('File holding the password (HACRL_NATS_PASSWORD overrides); default none'),
      nkeySeedFile: z
        .string()
        .min(1)
        .optional()
        .describe('File holding an nkey seed (HACRL_NATS_NKEY_SEED overrides); default none'),
      tlsCaFile: z.string().min(1).optional().describe("PEM file of the broker's CA: connect with TLS; default none"),
      tlsCertFile: z.string().min(1).optional().describe('PEM client certificate for TLS; default none'),
      tlsKeyFile: z.string().min(1).optional().describe('PEM client key for TLS; default none'),
    },
    'Rollout exchange of agents run as separate processes by `hacrl agent` over NATS JetStream ' +
      '(docs/distributed.md); `hacrl train` ignores it',
  ),
  ...defaults({
    runDir: field(z.string().min(1), 'runs/rl', 'Run folder: config, metrics.jsonl, samples.jsonl, checkpoints/'),
    samplesPerStep: field(count(0), 4, 'Completions per step written to samples.jsonl with parsed and gold answers'),
    maxNonFiniteSteps: field(
      count(1),
      3,
      'Consecutive steps with a non-finite loss or gradient (skipped) before stopping',
    ),
  }),
});

/** What a config file may hold (defaults still to fill). */
export type RunConfigInput = z.input<typeof RunConfigObject>;
/** A validated run configuration with every default filled in. */
export type RunConfig = z.output<typeof RunConfigObject>;
/** One agent's entry as written in the config. */
export type AgentConfig = RunConfig['agents'][number];

/** One agent's effective settings: its own where given, the run-wide ones otherwise. */
export type ResolvedAgent = Required<Omit<AgentConfig, 'system' | 'lora' | 'precision'>> & {
  system: string | undefined;
  /** The agent's LoRA settings, or null for full fine-tuning. */
  lora: LoraConfig | null;
  /** The precision of its products (fp32 unless the config says bf16). */
  precision: Precision;
};

/** The config section each per-agent setting inherits from (the same tables the schema is built from). */
const INHERITED_FROM: Record<string, 'optim' | 'rollout' | 'data' | 'hacpo'> = {
  lr: 'optim',
  groupSize: 'rollout',
  ...Object.fromEntries(Object.keys(SAMPLING).map((k) => [k, 'rollout'] as const)),
  ...Object.fromEntries([...Object.keys(PROMPT), 'system'].map((k) => [k, 'data'] as const)),
  ...Object.fromEntries(Object.keys(HACPO_PER_AGENT).map((k) => [k, 'hacpo'] as const)),
};

/** Every agent's effective settings, in config order. */
export function resolveAgents(c: RunConfig): ResolvedAgent[] {
  return c.agents.map((a) => {
    const own = a as Record<string, unknown>;
    const out: Record<string, unknown> = {
      name: a.name,
      checkpoint: a.checkpoint,
      lora: a.lora ?? null,
      precision: a.precision ?? 'fp32',
    };
    for (const [key, section] of Object.entries(INHERITED_FROM))
      out[key] = own[key] ?? (c[section] as Record<string, unknown>)[key];
    return out as ResolvedAgent;
  });
}

/** The JSON Schema of a config file (input side: fields with defaults are optional). */
export function configJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(RunConfigObject, { io: 'input' }),
    title: 'hacrl RL run configuration',
    description: 'YAML or JSON file for hacrl RL training; command-line overrides use key.path=value',
  };
}
