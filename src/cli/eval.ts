import { engine } from '../backend/engine.js';
import { evaluate, type Estimate, type EvalReport } from '../eval/evaluate.js';
import { loadPretrained } from '../model/pretrained.js';
import type { Precision } from '../tensor/bf16.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { PromptOptions } from '../tasks/prompt.js';
import { loadRunConfig } from '../config/load-config.js';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { checkWritableFile } from '../util/fs-errors.js';
import { checkPrecisionRuns } from './precision.js';
import { resolveRun } from '../train/resolved-run.js';

/** Options of `hacrl eval`. */
export interface EvalCliOptions {
  /** Checkpoint folders to evaluate. */
  model: string[];
  /** The base of every adapter folder among them, in place of the one each records. */
  base?: string;
  /** Data sets (files or generated specs, see loadDataSpec). */
  data: string[];
  /** Samples per problem for avg@k / pass@k / maj@k; 0 = greedy only. */
  k: number;
  temperature: number;
  topP: number;
  maxNewTokens: number;
  /** Evaluate only the first n problems of each data set (0 = all). */
  limit: number;
  /** Question template with {question} (default: the run config's, else the paper's boxed-answer suffix). */
  template?: string;
  /** System message of the prompt (default: the run config's, else none). */
  system?: string;
  /** A run's config file (its YAML, or config.resolved.json): the prompt's template and system message from it. */
  runConfig?: string;
  /** The agent of `runConfig` whose prompt to take, when its agents are prompted differently. */
  agent?: string;
  seed: number;
  /** Print one JSON object instead of the table. */
  json: boolean;
  /** Also write the full report (every problem's greedy response) here. */
  output?: string;
  /** Precision of the models' products, as a training agent's (src/cli/precision.ts); default fp32. */
  precision: Precision;
}

const pct = (e: Estimate | null): string =>
  e === null ? '—' : `${(100 * e.value).toFixed(1)}% [${(100 * e.low).toFixed(1)}, ${(100 * e.high).toFixed(1)}]`;

/**
 * The template and system message agent `agent` of the run config `file` renders its prompts with (inherited from
 * `data` where it sets none); without `agent`, those every agent shares. Throws naming the agents when `agent` is
 * not one, or when none is given and they are prompted differently.
 */
export async function runConfigPrompt(file: string, agent?: string): Promise<PromptOptions> {
  const { agents } = resolveRun(await loadRunConfig(file));
  const names = agents.map((a) => a.name).join(', ');
  const chosen = agent === undefined ? agents : agents.filter((a) => a.name === agent);
  if (chosen.length === 0) throw new Error(`--agent ${agent}: ${file} has no such agent (it has ${names})`);
  if (new Set(chosen.map((a) => JSON.stringify([a.template, a.system ?? null]))).size > 1)
    throw new Error(`${file}: its agents are prompted differently: pass --agent NAME (one of ${names})`);
  const { template, system } = chosen[0]!;
  return system === undefined ? { template } : { template, system };
}

/** `hacrl eval`: greedy and sampled accuracy with 95% intervals, per checkpoint and data set. */
export async function runEval(o: EvalCliOptions): Promise<void> {
  checkPrecisionRuns(o.precision);
  if (o.agent !== undefined && o.runConfig === undefined)
    throw new Error('--agent picks an agent of --run-config FILE');
  if (o.output !== undefined) await checkWritableFile(o.output, '--output');
  // --template and --system override what the run config says.
  const prompt: PromptOptions = o.runConfig === undefined ? {} : await runConfigPrompt(o.runConfig, o.agent);
  if (o.template !== undefined) prompt.template = o.template;
  if (o.system !== undefined) prompt.system = o.system;
  const k = engine();
  const rows: { model: string; data: string; report: EvalReport }[] = [];
  try {
    const datasets = await Promise.all(o.data.map(loadDataSpec));
    for (const dir of o.model) {
      const { model, tokenizer } = await loadPretrained(dir, new Map(), { precision: o.precision, base: o.base });
      for (const d of datasets) {
        const problems = o.limit > 0 ? d.problems.slice(0, o.limit) : d.problems;
        const report = await evaluate(model, k, tokenizer, problems, {
          k: o.k,
          temperature: o.temperature,
          topP: o.topP,
          maxNewTokens: o.maxNewTokens,
          seed: o.seed,
          name: dir,
          prompt,
        });
        rows.push({ model: dir, data: d.name, report });
        if (!o.json) {
          const c = report.checks;
          console.log(
            `${dir}  ${d.name}  n=${report.greedy.n}  greedy ${pct(report.greedy)}` +
              (o.k > 0
                ? `  avg@${o.k} ${pct(report.avgAtK)}  pass@${o.k} ${pct(report.passAtK)}  maj@${o.k} ${pct(report.majAtK)}`
                : '') +
              (c.timeouts + c.unparseableGold > 0
                ? `  (checks: ${c.timeouts} time-outs, ${c.unparseableGold} unparseable golds)`
                : ''),
          );
        }
      }
    }
  } finally {
    await closeDefaultPool();
  }
  const summary = rows.map(({ model, data, report: r }) => ({
    model,
    data,
    greedy: r.greedy,
    avg_at_k: r.avgAtK,
    pass_at_k: r.passAtK,
    maj_at_k: r.majAtK,
    k: r.k,
    checks: r.checks,
  }));
  if (o.output)
    await writeJsonAtomic(
      o.output,
      rows.map(({ model, data, report }) => ({ model, data, ...report })),
    );
  if (o.json) console.log(JSON.stringify({ results: summary }));
}
