/**
 * Cross-field checks of a run configuration, run before anything is loaded or generated: each refused combination
 * gets a message that names the fields and says what to change, instead of a shape error deep inside a step.
 */
import { basename, extname } from 'node:path';
import type { z } from 'zod';
import { stepwiseLowerBound } from '../algorithms/hacpo/stepwise-clip.js';
import { VARIANT_RECIPES, sharesRollouts } from '../algorithms/recipes.js';
import { SURROGATES } from '../algorithms/surrogates.js';
import type { RunConfig } from './rl-config.js';

/** A refused combination: where to look and what to change. */
export interface ConfigIssue {
  path: (string | number)[];
  message: string;
}

type Check = (c: RunConfig) => ConfigIssue[];

const issue = (path: (string | number)[], message: string): ConfigIssue[] => [{ path, message }];

const collaborationHasPartners: Check = (c) =>
  !sharesRollouts(c.algorithm) || c.agents.length >= 2
    ? []
    : issue(
        ['agents'],
        `algorithm "${c.algorithm}" trains agents on each other's rollouts but agents lists ${c.agents.length}: add ` +
          'a second agent, or use algorithm "gspo" to train one alone',
      );

const presetMatchesAlgorithm: Check = (c) => {
  if (c.preset === undefined) return [];
  const variant = VARIANT_RECIPES[c.preset];
  const want = variant.algorithm;
  const out =
    want === c.algorithm
      ? []
      : issue(
          ['algorithm'],
          `preset "${c.preset}" is a ${want} preset but algorithm is "${c.algorithm}": remove the preset or the algorithm`,
        );
  if ('agents' in variant && variant.agents === 'one' && c.agents.length !== 1)
    out.push({
      path: ['agents'],
      message: `preset "${c.preset}" is the one-agent baseline but agents lists ${c.agents.length}: keep one agent, or use preset "${want}"`,
    });
  return out;
};

const uniqueNames = (names: readonly string[], path: (i: number) => (string | number)[], what: string) =>
  names.flatMap((n, i) =>
    names.indexOf(n) < i ? issue(path(i), `${what} "${n}" is used twice: give each its own name`) : [],
  );

const agentNamesUnique: Check = (c) =>
  uniqueNames(
    c.agents.map((a) => a.name),
    (i) => ['agents', i, 'name'],
    'agent name',
  );

/** The group size of agent i: its own or the run-wide one. */
const groupSizeOf = (c: RunConfig, i: number): number => c.agents[i]?.groupSize ?? c.rollout.groupSize;

const workflowMatchesAlgorithm: Check = (c) => {
  const atGrpo = c.algorithm === 'at-grpo';
  if (atGrpo && c.workflow === undefined)
    return issue(
      ['workflow'],
      'algorithm "at-grpo" trains a multi-agent workflow: add a workflow section (docs/at-grpo.md)',
    );
  if (!atGrpo && c.workflow !== undefined)
    return issue(
      ['algorithm'],
      `a workflow section is trained by algorithm "at-grpo", not "${c.algorithm}": set algorithm: at-grpo`,
    );
  if (atGrpo && c.workflow!.groupSize < 2)
    return issue(
      ['workflow', 'groupSize'],
      'workflow.groupSize is 1: every (instance, agent, turn) group would hold one sample and every advantage would be 0; set it to 2 or more',
    );
  return [];
};

const miniBatchesDivide: Check = (c) => {
  // A workflow's sample count varies by step (turns end early): mini-batches are then as equal as it allows.
  if (c.workflow !== undefined) return [];
  const b = c.rollout.promptsPerStep;
  const m = c.optim.miniBatches;
  const sizes = c.agents.map((_, i) => groupSizeOf(c, i));
  // A collaborative learner trains on every agent's rollouts; an agent alone on its own.
  const totals = sharesRollouts(c.algorithm) ? [b * sizes.reduce((x, y) => x + y, 0)] : sizes.map((g) => b * g);
  if (m < 1) return []; // reported by the field's own check
  return [...new Set(totals)].flatMap((total) => {
    if (total % m === 0) return [];
    // Divisors by trial up to √total: the hint stays cheap for any total.
    const found = new Set<number>();
    for (let d = 1; d * d <= total; d++) if (total % d === 0) found.add(d).add(total / d);
    const divisors = [...found].sort((x, y) => x - y);
    return issue(
      ['optim', 'miniBatches'],
      `${total} rollouts per step and learner (rollout.promptsPerStep ${b} × the group sizes${
        sharesRollouts(c.algorithm) ? ' of all agents' : ''
      }) cannot be split into ${m} equal mini-batches: set optim.miniBatches to a divisor of ${total} ` +
        `(${divisors.join(', ')})`,
    );
  });
};

const groupsHaveTwo: Check = (c) => {
  if (c.workflow !== undefined) return []; // checked as workflow.groupSize (workflowMatchesAlgorithm)
  // A collaborative group holds every agent's responses to the prompt, so G = 1 per agent still gives a baseline.
  if (sharesRollouts(c.algorithm)) return [];
  return c.agents.flatMap((a, i) =>
    groupSizeOf(c, i) !== 1
      ? []
      : issue(
          a.groupSize === undefined ? ['rollout', 'groupSize'] : ['agents', i, 'groupSize'],
          'the group size is 1: advantages are taken relative to the group mean, so a group of one always gets 0 ' +
            'and nothing is learned; set it to 2 or more',
        ),
  );
};

const samplingNotGreedy: Check = (c) => {
  const paths = c.agents.flatMap((a, i) => {
    if ((a.temperature ?? c.rollout.temperature) !== 0 || groupSizeOf(c, i) < 2) return [];
    return [a.temperature === undefined ? 'rollout.temperature' : `agents.${i}.temperature`];
  });
  return [...new Set(paths)].map((p) => ({
    path: p.split('.').map((s) => (/^\d+$/.test(s) ? Number(s) : s)),
    message:
      `${p} is 0 (greedy) with a group size above 1: all completions of a prompt by one agent would be ` +
      'identical and every advantage 0; set a temperature above 0 (e.g. 1)',
  }));
};

const someReward: Check = (c) => {
  const { math, format, custom } = c.reward;
  if (math !== 0 || format !== 0 || custom.some((r) => r.weight !== 0)) return [];
  return issue(
    ['reward'],
    'every reward weight is 0, so every reward would be 0: give reward.math, reward.format or a reward.custom ' +
      'entry a non-zero weight',
  );
};

const customRewardNames: Check = (c) => {
  const names = c.reward.custom.map((r) => r.name ?? basename(r.path, extname(r.path)));
  const path = (i: number) => ['reward', 'custom', i, 'name'];
  return [
    ...names.flatMap((n, i) =>
      n === 'math' || n === 'format'
        ? issue(path(i), `custom reward name "${n}" is taken by the built-in reward: set reward.custom.${i}.name`)
        : [],
    ),
    ...uniqueNames(names, path, 'custom reward name'),
  ];
};

const warmupEnds: Check = (c) =>
  c.optim.warmupSteps === 0 || c.optim.warmupSteps < c.steps
    ? []
    : issue(
        ['optim', 'warmupSteps'],
        `optim.warmupSteps (${c.optim.warmupSteps}) must be less than steps (${c.steps}), or the learning rate ` +
          'never reaches optim.lr: shorten the warm-up or train longer',
      );

const templatesHaveQuestion: Check = (c) => {
  const templates: [(string | number)[], string | undefined][] = [
    [['data', 'template'], c.data.template],
    ...c.agents.map((a, i): [(string | number)[], string | undefined] => [['agents', i, 'template'], a.template]),
  ];
  return templates.flatMap(([path, t]) =>
    t === undefined || t.includes('{question}')
      ? []
      : issue(path, `${path.join('.')} has no {question} placeholder, so no question would reach the model: add one`),
  );
};

const stepwiseBandStaysOpen: Check = (c) => {
  if (c.algorithm !== 'hacpo' || !SURROGATES[c.hacpo.foreignSurrogate].stepwise) return [];
  const updates = c.optim.miniBatches * c.optim.epochs;
  return c.agents.flatMap((a, i) => {
    const delta = a.delta ?? c.hacpo.delta;
    const step = a.deltaStep ?? c.hacpo.deltaStep;
    if (!(updates >= 1 && delta > 0 && delta < 1 && step >= 0)) return []; // reported by the fields' own checks
    // Eq. 14's lower bound reaches 1 at the last update m = M·E − 1: no foreign sample could pass.
    if (stepwiseLowerBound({ delta, deltaStep: step }, updates - 1) < 1 - 1e-12) return [];
    const where = a.deltaStep === undefined ? 'hacpo.deltaStep' : `agents.${i}.deltaStep`;
    return issue(
      a.deltaStep === undefined ? ['hacpo', 'deltaStep'] : ['agents', i, 'deltaStep'],
      `${where} ${step} closes the foreign clip band by the last of the ${updates} updates per step ` +
        `(1 − δ + ${updates - 1}·δ_step ≥ 1 with δ ${delta}), so those updates would ignore every foreign sample: ` +
        `set it below ${(delta / Math.max(1, updates - 1)).toPrecision(3)} or use fewer mini-batches or epochs`,
    );
  });
};

const rolloutCorrectionApplies: Check = (c) => {
  const o = c.optim;
  if (o.rolloutCorrection === 'none') return [];
  if (c.workflow !== undefined)
    return issue(
      ['optim', 'rolloutCorrection'],
      `optim.rolloutCorrection is '${o.rolloutCorrection}' but a workflow run does not record its sampling ` +
        "log-probs: set it to 'none'",
    );
  if (o.rolloutCorrectionLevel === 'token' && SURROGATES[o.surrogate].ratioLevel === 'sequence')
    return issue(
      ['optim', 'rolloutCorrectionLevel'],
      `optim.surrogate '${o.surrogate}' forms one ratio per response, so the rollout correction cannot weigh its ` +
        'tokens one by one: set optim.rolloutCorrectionLevel: sequence',
    );
  return [];
};

const samplerOldLogProbsRecorded: Check = (c) => {
  const o = c.optim;
  if (o.oldLogProbs !== 'sampler') return [];
  if (c.workflow !== undefined)
    return issue(
      ['optim', 'oldLogProbs'],
      "optim.oldLogProbs is 'sampler' but a workflow run does not record its sampling log-probs: set it to 'learner'",
    );
  if (o.rolloutCorrection !== 'none')
    return issue(
      ['optim', 'rolloutCorrection'],
      `optim.rolloutCorrection is '${o.rolloutCorrection}' but optim.oldLogProbs 'sampler' makes the old log-probs ` +
        "the sampler's, so there is no mismatch left to correct: set optim.rolloutCorrection: none, or " +
        'optim.oldLogProbs: learner',
    );
  return [];
};

// A checkpointed block runs its forward without a tape and recomputes it on one in the backward (ops.checkpoint):
// dropout would draw its masks only in the recomputation, so the gradient would not be the forward's.
const dropoutNotCheckpointed: Check = (c) =>
  !c.optim.activationCheckpointing
    ? []
    : c.agents.flatMap((a, i) =>
        (a.lora?.dropout ?? 0) > 0
          ? issue(
              ['agents', i, 'lora', 'dropout'],
              `agent ${a.name} has lora.dropout ${a.lora!.dropout} and optim.activationCheckpointing is on: set ` +
                'lora.dropout to 0 or turn activation checkpointing off',
            )
          : [],
      );

const CHECKS: readonly Check[] = [
  rolloutCorrectionApplies,
  samplerOldLogProbsRecorded,
  workflowMatchesAlgorithm,
  stepwiseBandStaysOpen,
  collaborationHasPartners,
  presetMatchesAlgorithm,
  agentNamesUnique,
  miniBatchesDivide,
  groupsHaveTwo,
  samplingNotGreedy,
  someReward,
  customRewardNames,
  warmupEnds,
  templatesHaveQuestion,
  dropoutNotCheckpointed,
];

/** Fields whose values the mini-batch check computes with: bounded, but only once their own checks pass. */
const SIZE_FIELDS = /^(rollout\.(promptsPerStep|groupSize)|agents\.\d+\.groupSize|optim\.miniBatches)$/;

/**
 * Every refused combination in `c` (empty when the config is consistent). With `sizesInBounds` false (a size failed
 * its own bound) the mini-batch check is skipped: its divisor search over promptsPerStep × groupSize = 1e18 would take
 * seconds, and the size's own error says what to change.
 */
export function configIssues(c: RunConfig, sizesInBounds = true): ConfigIssue[] {
  return CHECKS.filter((check) => sizesInBounds || check !== miniBatchesDivide).flatMap((check) => check(c));
}

/** The checks as a zod refinement: every issue is reported at its field. */
export function checkRunConfig(c: RunConfig, ctx: z.RefinementCtx): void {
  const sizesInBounds = !ctx.issues.some((i) => SIZE_FIELDS.test((i.path ?? []).join('.')));
  for (const { path, message } of configIssues(c, sizesInBounds)) ctx.addIssue({ code: 'custom', path, message });
}
