/** The run configuration of an RL run on zoo agents, validated by the run-config schema like any file. */
import { reproducibleMode } from '../backend/select.js';
import { parseRunConfig } from '../config/load-config.js';
import type { RunConfig } from '../config/rl-config.js';
import { fillDefaults } from '../config/recipe-defaults.js';
import type { ZooData } from '../zoo/recipes.js';

/** What varies between the demo's and the bench's runs. */
export interface ZooRunSettings {
  /** Agents by name and checkpoint folder. */
  agents: { name: string; dir: string }[];
  data: ZooData;
  /** Steps, prompts per step (B), responses per prompt (G; omitted: the preset's or the default 8). */
  steps: number;
  prompts: number;
  groupSize?: number;
  /** Peak learning rate of every agent. */
  lr: number;
  seed: number;
  runDir: string;
  /** Method values (preset, algorithm, hacpo switches, reward), applied over the common ones. */
  method: Record<string, unknown>;
}

/** The validated configuration: training on the zoo's training problems, no validation inside, one final checkpoint. */
export function zooRunConfig(s: ZooRunSettings): RunConfig {
  const d = s.data;
  const common: Record<string, unknown> = {
    agents: s.agents.map((a) => ({ name: a.name, checkpoint: a.dir })),
    data: { train: `${d.task}:train:${d.trainN}:${d.seed}`, validation: [], template: d.template },
    rollout: {
      promptsPerStep: s.prompts,
      maxNewTokens: d.maxNewTokens,
      ...(s.groupSize === undefined ? {} : { groupSize: s.groupSize }),
    },
    optim: { lr: s.lr, weightDecay: 0 },
    steps: s.steps,
    seed: s.seed,
    eval: { every: 0 },
    checkpoint: { every: 0, keepLast: 1 },
    samplesPerStep: 4,
    runDir: s.runDir,
    // Recorded, so that a bench resumed with the other kernels is refused rather than mixed.
    reproducible: reproducibleMode().on,
  };
  return parseRunConfig(fillDefaults(s.method, common), `the configuration of ${s.runDir}`);
}
