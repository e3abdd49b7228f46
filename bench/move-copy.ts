/**
 * `npm run bench:copy -- [--steps 1000] [--rows 8000] [--every 250]`: can the bench's Sokoban agent (the `bench mas`
 * full size: qwen3, hidden 64, 2 layers, character tokenizer) learn the planner's copy of its tool agent's solving
 * move list, with the move list written as JSON (`["R","D"]`, the spec's) and as letters (`RD`)? For each format a
 * fresh agent is SFT-trained on planner rows alone — the real planner prompt of a bench room with the tool's solving
 * proposal, answered by that proposal — and played greedily on the 100 calibration rooms every `every` steps; the
 * table gives the share of exact copies side by side. A probe of one skill, not a warm start: the workflow's warm start
 * also trains the tool agent's program and second turns.
 */
import { engine } from '../src/backend/engine.js';
import { SOKOBAN_BENCH } from '../src/envs/sokoban.js';
import { sftStepper } from '../src/agents/sft-trainer.js';
import {
  WORKFLOW_AGENT_CHARS,
  WORKFLOW_AGENT_POSITIONS,
  WarmStartSchema,
  warmStartSft,
} from '../src/agents/workflow-agent.js';
import { AgentSpecSchema, buildModel, buildTokenizer } from '../src/model/agent-spec.js';
import type { Problem } from '../src/tasks/problem.js';
import { CALIBRATION_SEED } from '../src/workflows/play.js';
import { Rng } from '../src/util/rng.js';
import { modelPolicy } from '../src/workflows/model-policy.js';
import { workflowOf } from '../src/workflows/registry.js';
import { startEpisode } from '../src/workflows/workflow.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import { count } from './cli-args.js';

const STEPS = count('steps', 1000);
const ROWS = count('rows', 8000);
const EVERY = count('every', 250);
const FORMATS = ['json', 'letters'] as const;

/** The planner's first-turn prompt for room `seed` after the tool proposed the solver's moves, and that answer. */
function plannerRows(moves: (typeof FORMATS)[number], seeds: readonly number[]): { prompt: string; answer: string }[] {
  const wf = workflowOf(parseWorkflowConfig({ name: 'sokoban', env: { ...SOKOBAN_BENCH, moves }, toolMode: 'code' }));
  const planner = wf.roles.find((r) => r.name === 'planner')!;
  return seeds.map((seed) => {
    const start = startEpisode(wf, seed);
    const answer = planner.expert(start)!;
    const proposal = { turn: 0, role: 'tool', response: '', feedback: `${answer} (simulated: solved)` };
    return { prompt: planner.prompt({ ...start, history: [proposal] }), answer };
  });
}

const k = engine();
const exact: Record<string, number[]> = {};
for (const moves of FORMATS) {
  const train = plannerRows(
    moves,
    Array.from({ length: ROWS }, (_, i) => 1_000_000 + i),
  );
  const calibration = plannerRows(
    moves,
    Array.from({ length: 100 }, (_, i) => CALIBRATION_SEED + i),
  );
  const spec = AgentSpecSchema.parse({ hidden: 64, layers: 2, heads: 4, maxPositions: WORKFLOW_AGENT_POSITIONS });
  const tokenizer = buildTokenizer(spec, [WORKFLOW_AGENT_CHARS, ...train.flatMap((r) => [r.prompt, r.answer])]);
  const model = buildModel(spec, tokenizer);
  const problems: Problem[] = train.map((r, i) => ({
    id: String(i),
    prompt: r.prompt,
    answer: r.answer,
    solution: r.answer,
    task: 'copy',
    difficulty: {},
  }));
  // The bench's warm-start settings (its batch and learning rate: WarmStartSchema's defaults).
  const stepper = sftStepper(model, k, tokenizer, problems, warmStartSft(WarmStartSchema.parse({ steps: STEPS }), 0));
  const policy = modelPolicy(model, tokenizer, k, new Rng(1));
  exact[moves] = [];
  for (let s = 1; s <= STEPS; s++) {
    stepper.step();
    if (s % EVERY !== 0 && s !== STEPS) continue;
    const out = await policy.generate(
      calibration.map((r) => r.prompt),
      { temperature: 0, topP: 1, maxNewTokens: 48, stopStrings: ['\n'] },
    );
    exact[moves].push(out.filter((o, i) => o.text.trim() === calibration[i]!.answer).length);
    process.stderr.write(`${moves}: step ${s}/${STEPS}, exact copies ${exact[moves].at(-1)}%\n`);
  }
}
console.log(`exact copies of the tool's move list, % of 100 calibration rooms (${k.name}, ${k.blas})`);
console.log('| steps | json | letters |\n| ----- | ---- | ------- |');
exact['json']!.forEach((_, i) =>
  console.log(`| ${Math.min((i + 1) * EVERY, STEPS)} | ${exact['json']![i]} | ${exact['letters']![i]} |`),
);
