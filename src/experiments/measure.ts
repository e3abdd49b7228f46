/** Greedy accuracy of a checkpoint per split, kept per problem so that two checkpoints can be compared pairwise. */
import { engine } from '../backend/engine.js';
import { evaluate, type Estimate } from '../eval/evaluate.js';
import { loadPretrained } from '../model/pretrained.js';
import type { Dataset } from '../tasks/problem.js';
import type { ZooData } from '../zoo/recipes.js';

/** One split's result: the greedy estimate and 1/0 per problem in the split's order. */
export interface SplitCorrectness {
  estimate: Estimate;
  correct: number[];
}

/** Greedy correctness of the checkpoint in `dir` on each split, prompted and bounded as the zoo data says. */
export async function measureCheckpoint(
  dir: string,
  splits: readonly Dataset[],
  data: Pick<ZooData, 'template' | 'maxNewTokens'>,
): Promise<SplitCorrectness[]> {
  const { model, tokenizer } = await loadPretrained(dir);
  const out: SplitCorrectness[] = [];
  for (const s of splits) {
    const r = await evaluate(model, engine(), tokenizer, s.problems, {
      maxNewTokens: data.maxNewTokens,
      prompt: { template: data.template },
    });
    out.push({ estimate: r.greedy, correct: r.problems.map((p) => (p.greedy.correct ? 1 : 0)) });
  }
  return out;
}
