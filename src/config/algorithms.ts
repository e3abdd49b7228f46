/** The algorithm names a run config accepts. */

/** grpo and gspo train every agent alone; hacpo and naive train 2 or more agents on each other's rollouts. */
export const ALGORITHMS = ['grpo', 'gspo', 'hacpo', 'naive'] as const;
/** An algorithm name. */
export type Algorithm = (typeof ALGORITHMS)[number];

/** Whether the agents of a run learn from each other's rollouts (HACPO and the naive-sharing baseline). */
export function isCollaborative(algorithm: Algorithm): boolean {
  return algorithm === 'hacpo' || algorithm === 'naive';
}
