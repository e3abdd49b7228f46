/**
 * The sha256 of each zoo agent's model.safetensors as the reproducible mode builds it, which every machine must
 * reproduce (`hacrl zoo build --check` compares). `hash` is the start of the recipe's folder hash (agentHash in the
 * mode): a changed recipe has no recorded digest until its new one is recorded here, with the commit and CPU that
 * computed it. Each was computed on an AMD EPYC with AVX-512 and checked equal with HACRL_FORCE_AVX2=1 (and, for the
 * tiny pair, the TypeScript backend, 1 thread and OpenBLAS).
 */
export const RECORDED_WEIGHTS: Readonly<Record<string, { hash: string; sha256: string }>> = {
  'tiny/small': { hash: 'b081895bc06c', sha256: '54e182d40962feb671eb16fd60c11027dacb9141c7d60d485f49692166b9c43a' },
  'tiny/large': { hash: '9a064f779d9d', sha256: 'b929d45b7c08daa7c561badca8b8d97c4c32334680334af40b1dc9d5a3ed4755' },
};
