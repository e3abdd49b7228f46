/** The algorithm names a run config accepts, and which of them the trainer implements today. */

/** The algorithms the config names (hacpo and naive are reserved for the multi-agent work). */
export const ALGORITHMS = ['grpo', 'gspo', 'hacpo', 'naive'] as const;
/** An algorithm name. */
export type Algorithm = (typeof ALGORITHMS)[number];
/** The algorithms a run can use today; the config checks refuse the others with a message. */
export const IMPLEMENTED_ALGORITHMS: readonly Algorithm[] = ['grpo', 'gspo'];
