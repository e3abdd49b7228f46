/**
 * Which responses answer the same prompt. Group-relative methods compare a response only with the others of its
 * group, so a wrong grouping silently turns GRPO into REINFORCE without a baseline; everything here validates.
 */

/** `groupSize` consecutive responses per prompt, or an explicit group id (any number or string) per response. */
export type Grouping = { groupSize: number } | { groupIds: ArrayLike<number> | readonly string[] };

/** The response indices of each group, groups in order of first appearance; throws on groups of fewer than 2. */
export function groupMembers(count: number, grouping: Grouping): number[][] {
  const groups = 'groupSize' in grouping ? contiguousGroups(count, grouping.groupSize) : groupsById(count, grouping);
  for (const [g, members] of groups.entries()) {
    if (members.length < 2) throw new Error(singletonMessage(grouping, g));
  }
  return groups;
}

/** Splits 0…count−1 into runs of `size`. */
function contiguousGroups(count: number, size: number): number[][] {
  if (!Number.isInteger(size) || size < 1) throw new Error(`groupSize must be a positive integer, got ${size}`);
  if (count % size !== 0) {
    throw new Error(
      `${count} rewards do not split into groups of ${size} responses per prompt: ` +
        `pass prompts × groupSize rewards, grouped prompt by prompt`,
    );
  }
  return Array.from({ length: count / size }, (_, g) => Array.from({ length: size }, (_, j) => g * size + j));
}

/** Collects the indices sharing each id. */
function groupsById(count: number, grouping: { groupIds: ArrayLike<number> | readonly string[] }): number[][] {
  const ids = grouping.groupIds;
  if (ids.length !== count) throw new Error(`${ids.length} group ids for ${count} rewards: pass one id per response`);
  const byId = new Map<number | string, number[]>();
  for (let i = 0; i < count; i++) {
    const id = ids[i]!;
    const members = byId.get(id);
    if (members) members.push(i);
    else byId.set(id, [i]);
  }
  return [...byId.values()];
}

/** The error for a one-response group, saying what to change. */
function singletonMessage(grouping: Grouping, group: number): string {
  const why =
    'a group-relative advantage compares each response with the other responses to the same prompt, ' +
    'so a group of 1 has no baseline (its advantage would always be 0)';
  if ('groupSize' in grouping) return `group size 1: ${why}; set the group size (responses per prompt) to 2 or more`;
  return `group ${group} has 1 response: ${why}; check the group ids (one id per prompt, shared by its responses)`;
}

/** Mean of the values at `members`. */
export function groupMean(values: ArrayLike<number>, members: readonly number[]): number {
  let sum = 0;
  for (const i of members) sum += values[i]!;
  return sum / members.length;
}

/**
 * Unbiased (Bessel, n − 1) standard deviation of the values at `members` — what torch.std computes by default and
 * hence what verl's and TRL's GRPO advantages use.
 */
export function groupStd(values: ArrayLike<number>, members: readonly number[]): number {
  const mean = groupMean(values, members);
  let sq = 0;
  for (const i of members) sq += (values[i]! - mean) ** 2;
  return Math.sqrt(sq / (members.length - 1));
}

/** True when every value at `members` lies within `tolerance` of the others (max − min ≤ tolerance). */
export function groupIsConstant(values: ArrayLike<number>, members: readonly number[], tolerance = 0): boolean {
  let lo = Infinity;
  let hi = -Infinity;
  for (const i of members) {
    lo = Math.min(lo, values[i]!);
    hi = Math.max(hi, values[i]!);
  }
  return hi - lo <= tolerance;
}
