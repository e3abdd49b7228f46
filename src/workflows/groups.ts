/**
 * Groups of samples for AT-GRPO's advantages, validated: a group of one sample when K > 1 has no baseline, and a
 * group mixing instances (the reference's `instance // K` key) compares responses to different prompts. Both are
 * errors naming the key.
 */
import type { Grouping, MasSample } from './samples.js';

/** A group: its key and the indices of its samples, in sample order. */
export interface SampleGroup {
  key: string;
  members: number[];
}

/**
 * Groups by `keyOf` (default: the sampler's `group` field), in order of first appearance, validated against K. A
 * group may mix roles only under `grouping` 'turn' (default 'agent-turn'), and never policies: each policy trains on
 * its own groups.
 */
export function groupSamples(
  samples: readonly MasSample[],
  groupSize: number,
  grouping: Grouping = 'agent-turn',
  keyOf: (s: MasSample, index: number) => string = (s) => s.group,
): SampleGroup[] {
  const byKey = new Map<string, number[]>();
  samples.forEach((s, i) => {
    const key = keyOf(s, i);
    const members = byKey.get(key);
    if (members) members.push(i);
    else byKey.set(key, [i]);
  });
  const groups = [...byKey].map(([key, members]) => ({ key, members }));
  for (const g of groups) {
    const instances = [...new Set(g.members.map((i) => samples[i]!.instance))];
    if (instances.length > 1)
      throw new Error(
        `group "${g.key}" mixes instances ${instances.join(', ')}: a group must hold responses to one instance ` +
          '(key by instance, agent and turn, never by instance index // K)',
      );
    const roles = [...new Set(g.members.map((i) => samples[i]!.role))];
    if (roles.length > 1 && grouping !== 'turn')
      throw new Error(`group "${g.key}" mixes roles ${roles.join(', ')}: key by agent too`);
    const policies = [...new Set(g.members.map((i) => samples[i]!.policy))];
    if (policies.length > 1)
      throw new Error(
        `group "${g.key}" mixes policies ${policies.join(', ')}: a group trains one policy; with per-role policies ` +
          "set workflow.grouping to 'agent-turn' or 'agent'",
      );
    if (groupSize > 1 && g.members.length === 1)
      throw new Error(
        `group "${g.key}" has 1 sample but K = ${groupSize} (the group size): a group-relative advantage needs 2 or more responses to the ` +
          'same state; check the group keys (tree: one group per instance, agent and turn)',
      );
  }
  return groups;
}
