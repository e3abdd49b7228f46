import { closeDefaultPool } from '../rewards/worker-pool.js';
import {
  agentDir,
  defaultZooDir,
  ensurePair,
  pct,
  readManifest,
  rebuildMismatches,
  recordedMismatches,
} from '../zoo/build.js';
import { pairRecipe, ZOO, type PairRecipe } from '../zoo/recipes.js';

/** Options of `hacrl zoo build` and `hacrl zoo list`. */
export interface ZooCliOptions {
  /** Only this pair (state, size, model, tiny); default: state, size and model. */
  only?: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  dir?: string;
  /**
   * Compare each agent's weights with the digest recorded for its recipe (src/zoo/recorded.ts; reproducible mode),
   * then rebuild it into a scratch folder and compare again.
   */
  check?: boolean;
  /** `list`: print one JSON object. */
  json?: boolean;
}

/** The pairs a command acts on: the named one, or every full-size pair (tiny is for tests). */
function selectedPairs(only: string | undefined): PairRecipe[] {
  return only === undefined ? [ZOO.state, ZOO.size, ZOO.model] : [pairRecipe(only)];
}

/** `hacrl zoo build`: builds the missing agents (and with --check, proves a rebuild gives the same bytes). */
export async function runZooBuild(o: ZooCliOptions): Promise<void> {
  const dir = o.dir ?? defaultZooDir();
  const log = (line: string) => console.log(line);
  let mismatches = 0;
  try {
    for (const pair of selectedPairs(o.only)) {
      const built = await ensurePair(pair, dir, log);
      if (o.check)
        mismatches += (await recordedMismatches(pair, built, log)) + (await rebuildMismatches(pair, built, dir, log));
    }
  } finally {
    await closeDefaultPool();
  }
  if (mismatches > 0)
    throw new Error(
      `${mismatches} zoo check(s) failed: the weights differ from the recorded digest or from a rebuild (the lines ` +
        'above say which); in the reproducible mode that is a bug of the mode on this machine: please report it',
    );
}

/** `hacrl zoo list`: every pair's agents, where they are, and (when built) their accuracy and build time. */
export async function runZooList(o: ZooCliOptions): Promise<void> {
  const dir = o.dir ?? defaultZooDir();
  const rows = [];
  for (const pair of o.only === undefined ? Object.values(ZOO) : [pairRecipe(o.only)])
    for (const agent of pair.agents) {
      const folder = agentDir(dir, pair, agent);
      const m = await readManifest(folder);
      rows.push({ pair: pair.name, agent: agent.name, description: pair.description, dir: folder, manifest: m });
      if (!o.json)
        console.log(
          `${pair.name}/${agent.name}  ${agent.spec.arch} ${agent.spec.layers}×${agent.spec.hidden} ` +
            `${agent.spec.tokenizer}  ${agent.sft.steps} steps${agent.continues ? ` after ${agent.continues}` : ''}  ` +
            (m === null
              ? 'not built'
              : `${pct(m.accuracy)} n=${m.accuracy.n}  built in ${m.buildSeconds.toFixed(0)} s ` +
                (m.cpuSeconds === undefined ? '' : `(${m.cpuSeconds.toFixed(0)} CPU s) `) +
                `(load ${m.machine.load1.toFixed(1)} on ${m.machine.cpus} cores)`) +
            `  ${folder}`,
        );
    }
  if (o.json) console.log(JSON.stringify({ dir, agents: rows }));
}
