/**
 * The `workflow` section of a run config: which registered workflow, its environment knobs, which roles act, each
 * role's policy, sampling, stop strings, reward mix and skipped turns, how episodes are sampled and the group filter.
 * Each field is documented once, by its `.describe()` text: `hacrl config schema` prints it (configJsonSchema).
 */
import { z } from 'zod';
import { SandboxLimitsSchema } from '../sandbox/run-code.js';
import { parseSection } from '../util/json-file.js';
import { DEFAULT_GROUP_FILTER } from './group-filter.js';
import { GROUPINGS } from './samples.js';

/** Largest workflow.maxTurns (and history): an episode's prompts grow with its turns. */
const MAX_TURNS = 64;
/** Largest workflow.groupSize K: a tree step samples K responses per role and turn for every instance. */
const MAX_K = 64;
/** Largest maxTokens of a role. */
const MAX_TOKENS = 4096;
/** Most roles in workflow.agents. */
const MAX_ROLES = 16;

/** Per-role settings; every field falls back to the workflow's default for that role. */
export const RoleConfigSchema = z
  .object({
    policy: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Name of the policy playing this role (same name for every role: one shared policy); default 'shared'.",
      ),
    temperature: z
      .number()
      .min(0)
      .max(10, 'must be at most 10')
      .optional()
      .describe("Sampling temperature; default 1.0 (the spec's training setting), at most 10."),
    topP: z.number().gt(0).max(1).optional().describe("Nucleus mass; default 0.95 (the spec's training setting)."),
    maxNewTokens: z
      .number()
      .int()
      .positive()
      .max(MAX_TOKENS, `must be at most ${MAX_TOKENS}`)
      .optional()
      .describe(
        `Most new tokens per response; default set by the workflow (e.g. 48 for a move list), at most ${MAX_TOKENS}.`,
      ),
    stopStrings: z
      .array(z.string().min(1).max(256, 'a stop string has at most 256 characters'))
      .max(16, 'at most 16 stop strings')
      .optional()
      .describe(
        'Strings that end a response (kept out of it); default set by the workflow (e.g. ["\\n"] for one-line answers); at most 16 of 256 characters.',
      ),
    skipTurns: z
      .array(
        z
          .number()
          .int()
          .min(0)
          .max(MAX_TURNS - 1, `turns are numbered 0 to ${MAX_TURNS - 1}`),
      )
      .max(MAX_TURNS, `at most ${MAX_TURNS} turns`)
      .optional()
      .describe(`Turns (from 0) in which the role does not act; default none; each below ${MAX_TURNS}.`),
    ownScale: z
      .number()
      .optional()
      .describe(
        "Own reward = ownScale · r_env of the role's action; default 2 for planners/reasoners, 1 for tool agents.",
      ),
    parseFailure: z
      .number()
      .optional()
      .describe(
        'Own reward when no action can be parsed (planners add r_env of no action); default −2 (0 for the math reasoner).',
      ),
    teamWeight: z
      .number()
      .min(0)
      .optional()
      .describe('Weight of the team term (r_env of the later role named by the workflow); default 1; 0 turns it off.'),
  })
  .strict();
/** Per-role settings as written. */
export type RoleConfig = z.output<typeof RoleConfigSchema>;

/** The `workflow` section. */
export const WorkflowConfigSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .default('plan-path')
      .describe(
        "Registered workflow: 'plan-path', 'sokoban', 'sudoku', 'math-tool', 'coding' or one added with registerWorkflow; default 'plan-path'.",
      ),
    env: z
      .record(z.string(), z.unknown())
      .default({})
      .describe(
        "Environment knobs of the workflow's environment (size, walls, blanks, task…); default the environment's.",
      ),
    agents: z
      .array(z.string().min(1))
      .min(1)
      .max(MAX_ROLES, `at most ${MAX_ROLES} roles`)
      // A role listed twice would act twice per turn, and each of its groups would then mix two states.
      .superRefine((a, ctx) => {
        const twice = a.find((r, i) => a.indexOf(r) !== i);
        if (twice !== undefined)
          ctx.addIssue({
            code: 'custom',
            message: `lists role "${twice}" twice: each role acts once per turn; list it once`,
          });
      })
      .optional()
      .describe(
        `Roles that act, in turn order, each once (at most ${MAX_ROLES}); default all of the workflow's (the single-agent baseline: ["planner"]).`,
      ),
    roles: z.record(z.string(), RoleConfigSchema).default({}).describe('Settings per role name.'),
    maxTurns: z
      .number()
      .int()
      .positive()
      .max(MAX_TURNS, `must be at most ${MAX_TURNS}`)
      .default(5)
      .describe(
        `Turns before an episode is cut off (not a success); default 5 (the spec; Sokoban 4), at most ${MAX_TURNS}.`,
      ),
    history: z
      .number()
      .int()
      .min(0)
      .max(MAX_TURNS, `must be at most ${MAX_TURNS}`)
      .default(4)
      .describe(`Past history entries shown in each prompt; default 4; 0 shows none; at most ${MAX_TURNS}.`),
    sampling: z
      .enum(['tree', 'no-tree', 'single'])
      .default('tree')
      .describe(
        "'tree': K candidates per role and turn from one state, continue from the best; 'no-tree': K independent " +
          "episodes per instance; 'single': one agent alone (agents[0] when given, else the workflow's last role: the " +
          "planner or reasoner), K independent episodes; default 'tree'.",
      ),
    teamBranches: z
      .boolean()
      .default(false)
      .describe(
        'Tree only: later roles also act (one response each) in every non-chosen branch, so team terms differ ' +
          "within a group and train; default false (the spec's: they cancel).",
      ),
    groupSize: z
      .number()
      .int()
      .min(1)
      .max(MAX_K, `must be at most ${MAX_K}`)
      .default(4)
      .describe(
        `Group size, the K of the AT-GRPO spec: candidates per role and turn (tree) or episodes per instance ` +
          `(no-tree, single); default 4, at most ${MAX_K}.`,
      ),
    grouping: z
      .enum(GROUPINGS)
      .default('agent-turn')
      .describe(
        "Which samples share an advantage baseline within an instance: 'agent-turn' (per role and turn), 'agent' (per " +
          "role, turns pooled) or 'turn' (per turn, roles pooled; one shared policy only); default 'agent-turn' (the " +
          'spec); the pooled modes are the ablations of `hacrl bench mas --ablations`.',
      ),
    toolMode: z
      .enum(['text', 'code'])
      .default('text')
      .describe(
        "How a grid workflow's tool agent answers: 'text' (a move list) or 'code' (JavaScript printing one); default 'text'.",
      ),
    sandbox: SandboxLimitsSchema.partial().default({}).describe('Limits of the sandbox running tool code.'),
    groupFilter: z
      .object({
        lowMeanRatio: z
          .number()
          .min(0)
          .lt(1)
          .default(DEFAULT_GROUP_FILTER.lowMeanRatio)
          .describe(
            "Fraction of groups with the lowest mean reward to drop, in [0, 1), among each policy's own groups; " +
              `default ${DEFAULT_GROUP_FILTER.lowMeanRatio} (the reference); 0 = off.`,
          ),
      })
      .strict()
      .prefault({})
      .describe(
        "Which groups train (src/workflows/group-filter.ts); default: the reference's, lowest-mean half dropped; " +
          'groups whose rewards are all equal are left out by optim.filterZeroVariance, in the learner, as for every source.',
      ),
  })
  .strict();
/** The `workflow` section with defaults filled in. */
export type WorkflowConfig = z.output<typeof WorkflowConfigSchema>;

/** Parses a `workflow` section; errors name the field and say what is allowed. */
export function parseWorkflowConfig(input: unknown): WorkflowConfig {
  return parseSection(WorkflowConfigSchema, input ?? {}, 'workflow', 'workflow config');
}
