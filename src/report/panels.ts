/** Which metrics share a plot: the known ones in fixed, related groups first, then every other field on its own. */

/** A plot of the report: a title and the fields drawn in it. */
export interface Panel {
  title: string;
  /** Unit or meaning of the y axis, shown next to it; empty when the title says it. */
  yLabel: string;
  fields: string[];
}

interface PanelGroup {
  title: string;
  yLabel?: string;
  /** Fields in the order they are drawn (and listed in the legend). */
  names?: readonly string[];
  /** Further fields of the group (names the trainer may add later), placed after `names`. */
  pattern?: RegExp;
}

// Order follows how one reads a run: is it learning (reward, accuracy), how do the completions look, is the policy
// update healthy (entropy, KL, clipping, ratios), HACPO's cross-agent terms, optimiser state, and cost.
const GROUPS: readonly PanelGroup[] = [
  { title: 'Reward', names: ['reward_mean', 'reward_std'] },
  { title: 'Reward components', pattern: /^reward[_/]/ },
  { title: 'Accuracy (training samples)', names: ['accuracy'] },
  { title: 'Validation accuracy', pattern: /^val[_/]/ },
  // Multi-agent workflows (AT-GRPO): per role (role/R/…) and per role and turn (role/R/tT/…).
  {
    title: 'Success rate per role',
    yLabel: 'fraction',
    names: ['success_rate'],
    pattern: /^role\/[^/]+\/success_rate$/,
  },
  { title: 'Success rate per role and turn', yLabel: 'fraction', pattern: /^role\/[^/]+\/t\d+\/success_rate$/ },
  {
    title: 'Reward parts per role',
    names: ['own_mean', 'team_mean', 'env_reward_mean'],
    pattern: /^role\/[^/]+\/(reward|own|team|env_reward)_mean$/,
  },
  { title: 'Reward per role and turn', pattern: /^role\/[^/]+\/t\d+\/reward_mean$/ },
  {
    title: 'Groups and the group filter',
    yLabel: 'groups/step',
    names: ['groups', 'groups_kept', 'groups_dropped_low_mean', 'groups_dropped_zero_variance'],
    pattern: /^role\/[^/]+\/groups/,
  },
  { title: 'Group sizes', yLabel: 'samples', pattern: /(^|\/)group_size_/ },
  { title: 'Parse failures', yLabel: 'responses/step', pattern: /(^|\/)parse_failures$/ },
  { title: 'Sandbox outcomes', yLabel: 'programs/step', pattern: /(^|\/)sandbox_/ },
  {
    title: 'Workflow samples and episodes',
    names: ['samples', 'samples_trained', 'episodes'],
    pattern: /^role\/[^/]+\/samples$/,
  },
  { title: 'Per role and turn (other)', pattern: /^role\// },
  { title: 'Completion length', yLabel: 'tokens', names: ['length_mean', 'length_min', 'length_max'] },
  { title: 'Truncated and zero-variance', yLabel: 'fraction', names: ['truncated_frac', 'zero_var_groups_frac'] },
  { title: 'Entropy', yLabel: 'nats/token', names: ['entropy'] },
  { title: 'KL to reference', names: ['kl'] },
  { title: 'Clip fractions', yLabel: 'fraction', names: ['clip_frac_low', 'clip_frac_high'], pattern: /^clip_/ },
  { title: 'Importance ratios', names: ['ratio_mean', 'ratio_min', 'ratio_max'], pattern: /^ratio_/ },
  { title: 'Own importance ratios (HACPO)', pattern: /^own_ratio/ },
  { title: 'Own clip fraction (HACPO)', yLabel: 'fraction', pattern: /^own_clip/ },
  { title: 'Foreign importance ratios', pattern: /^foreign_ratio/ },
  {
    title: 'Foreign samples in the clip band',
    yLabel: 'fraction',
    names: ['foreign_in_band_frac'],
    pattern: /^foreign_in_band_frac_(m\d+|token|char)$/,
  },
  { title: 'Foreign samples', yLabel: 'samples/step', pattern: /^foreign_/ },
  { title: 'Baseline fallbacks (HACPO)', yLabel: 'prompts/step', names: ['baseline_fallback_groups'] },
  { title: 'Capability P̂ and ω', names: ['p_hat', 'omega'], pattern: /^(p_hat|omega)/ },
  { title: 'Loss', names: ['loss'] },
  { title: 'Gradient norm', names: ['grad_norm'] },
  { title: 'Learning rate', names: ['lr'] },
  { title: 'Tokens generated', yLabel: 'tokens/step', names: ['tokens'] },
  { title: 'Throughput', yLabel: 'tokens/s', names: ['tokens_per_s'] },
  {
    title: 'Time split',
    yLabel: 's/step',
    names: ['time_generate_s', 'time_score_s', 'time_train_s'],
    pattern: /^time_.+_s$/,
  },
  { title: 'Time', yLabel: 's', names: ['time_s'] },
  { title: 'Memory', pattern: /^(mem|memory|rss|heap)(_|\/|$)/ },
  { title: 'Health warnings (1 = raised)', pattern: /^warn\// },
];

function groupOf(field: string): PanelGroup | undefined {
  return GROUPS.find((g) => g.names?.includes(field) === true || g.pattern?.test(field) === true);
}

/** Panels for the given fields (in order of first appearance): known groups in a fixed order, then one per field. */
export function panelsFor(fields: readonly string[]): Panel[] {
  const grouped = new Map<PanelGroup, string[]>();
  const others: Panel[] = [];
  for (const field of fields) {
    const group = groupOf(field);
    if (group) grouped.set(group, [...(grouped.get(group) ?? []), field]);
    else others.push({ title: field, yLabel: '', fields: [field] });
  }
  const known = GROUPS.filter((g) => grouped.has(g)).map((g) => {
    const names = g.names ?? [];
    const present = grouped.get(g)!;
    const listed = names.filter((n) => present.includes(n));
    return {
      title: g.title,
      yLabel: g.yLabel ?? '',
      fields: [...listed, ...present.filter((f) => !names.includes(f))],
    };
  });
  return [...known, ...others];
}
