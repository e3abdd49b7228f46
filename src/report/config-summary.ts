/** The few settings that tell runs apart, found in config.resolved.json by name wherever the trainer nests them. */

/** Key settings of a run, as display strings ('—' when the config does not say). */
export interface ConfigSummary {
  algorithm: string;
  agents: string;
  /** Prompts per step. */
  B: string;
  /** Completions per prompt (group size). */
  G: string;
  lr: string;
  steps: string;
}

// Config layouts change while the trainer grows, so each setting is looked up under the names trainers commonly use
// (compared without case, '_' or '-') instead of at one fixed path.
const KEYS: Record<keyof ConfigSummary, readonly string[]> = {
  algorithm: ['algorithm', 'algo', 'method'],
  agents: ['agents'],
  B: ['promptsperstep', 'b', 'batchprompts', 'numprompts', 'batchsize'],
  G: ['groupsize', 'g', 'numgenerations', 'completionsperprompt'],
  lr: ['lr', 'learningrate'],
  steps: ['steps', 'totalsteps', 'maxsteps', 'numsteps'],
};

const norm = (k: string): string => k.toLowerCase().replace(/[_-]/g, '');
const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Values under any of `names`, taken from the shallowest level where one occurs (a top-level lr wins over the
 * agents' own), in order of preference of the names; several agents with their own lr give several values.
 */
function findValues(config: unknown, names: readonly string[]): unknown[] {
  let level: unknown[] = [config];
  while (level.length > 0) {
    const found: unknown[] = [];
    for (const name of names)
      for (const node of level)
        if (isRecord(node)) for (const [k, v] of Object.entries(node)) if (norm(k) === name) found.push(v);
    if (found.length > 0) return found;
    level = level.flatMap((n) => (isRecord(n) ? Object.values(n) : Array.isArray(n) ? n : []));
  }
  return [];
}

/** Names of the agents: list items' name/id/model (or the items themselves when strings), or an object's keys. */
function agentNames(v: unknown): string[] {
  if (Array.isArray(v))
    return v.map((a, i) => {
      if (typeof a === 'string') return a;
      const named = isRecord(a) ? [a.name, a.id, a.model].find((x) => typeof x === 'string') : undefined;
      return typeof named === 'string' ? named : `agent ${i + 1}`;
    });
  return isRecord(v) ? Object.keys(v) : [];
}

function display(values: unknown[]): string {
  const shown = [...new Set(values.filter((v) => typeof v !== 'object' || v === null).map((v) => String(v)))];
  return shown.length === 0 ? '—' : shown.join(', ');
}

/** The key settings of a run's resolved config (null config: every entry '—'). */
export function summarizeConfig(config: unknown): ConfigSummary {
  const get = (key: keyof ConfigSummary): string => display(findValues(config, KEYS[key]));
  const agents = findValues(config, KEYS.agents).flatMap(agentNames);
  return {
    algorithm: get('algorithm'),
    agents: agents.length === 0 ? '—' : `${agents.length}: ${agents.join(', ')}`,
    B: get('B'),
    G: get('G'),
    lr: get('lr'),
    steps: get('steps'),
  };
}
