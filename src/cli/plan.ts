import { loadRunConfig } from '../config/load-config.js';
import type { MemoryHeld, MemoryPlan } from '../model/memory-plan.js';
import { resolveRun } from '../train/resolved-run.js';
import { gib, planRun, precisionRefusal, type RunPlan } from '../train/run-plan.js';
import { machineMemory, type MachineMemory } from '../util/memory.js';

/** Options of `hacrl plan`. */
export interface PlanCliOptions {
  /** YAML or JSON run configuration. */
  config?: string;
  /** `key.path=value` overrides applied after the file. */
  set: string[];
  /** Longest prompt in tokens, instead of measuring data.train. */
  promptTokens?: number;
  /** Print one JSON object instead of the table. */
  json: boolean;
}

const HELD: Record<MemoryHeld, string> = {
  run: 'held all run',
  sampling: 'while sampling',
  scoring: 'while scoring',
  training: 'while training',
};

/** The one-line verdict: the estimate against the machine. */
export function planVerdict(plan: MemoryPlan, m: MachineMemory): string {
  const available = m.limitFromEnv ? 'HACRL_MEMORY_LIMIT_BYTES' : 'available';
  const fits = plan.total <= m.available ? 'fits' : 'does NOT fit';
  return (
    `memory plan: estimated peak ${gib(plan.total)} against ${gib(m.available)} ${available} ` +
    `(${gib(m.total)} total): ${fits}`
  );
}

function printPlan({ plan, prompts }: RunPlan, m: MachineMemory): void {
  for (const a of plan.agents) {
    const p = prompts.find((x) => x.agent === a.name)!;
    console.log(`agent ${a.name} (precision ${p.precision}, prompts up to ${p.tokens} tokens, ${p.source})`);
    for (const held of Object.keys(HELD) as MemoryHeld[]) {
      const parts = a.parts.filter((x) => x.held === held);
      if (parts.length === 0) continue;
      const sum = parts.reduce((n, x) => n + x.bytes, 0);
      const peak = held === a.phase.name ? ' (its largest phase)' : '';
      console.log(`  ${HELD[held].padEnd(15)} ${gib(sum).padStart(11)}${peak}`);
      for (const x of parts) console.log(`    ${x.name.padEnd(32)} ${gib(x.bytes).padStart(11)}`);
    }
  }
  console.log(`process baseline (Node, addon, BLAS) ${gib(plan.baseline)}`);
  if (plan.peakPhase)
    console.log(`largest phase: ${plan.peakPhase.name} of ${plan.peakPhase.agent} ${gib(plan.peakPhase.bytes)}`);
  console.log(planVerdict(plan, m));
}

/** `hacrl plan`: the estimated peak memory of a run, per agent and part, against this machine's memory. */
export async function runPlan(o: PlanCliOptions): Promise<void> {
  const run = resolveRun(await loadRunConfig(o.config, o.set));
  // A run this machine cannot compute is refused here as `hacrl train` would refuse it.
  const refusal = precisionRefusal(run.agents);
  if (refusal) throw new Error(refusal);
  const planned = await planRun(run, o.promptTokens === undefined ? {} : { promptTokens: o.promptTokens });
  const m = machineMemory();
  if (o.json) console.log(JSON.stringify({ ...planned, machine: m }));
  else printPlan(planned, m);
}
