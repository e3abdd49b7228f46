/**
 * The sha256 of each zoo agent's model.safetensors as the reproducible mode builds it, which every machine must
 * reproduce (`hacrl zoo build --check` compares). `hash` is the start of the recipe's folder hash (agentHash in the
 * mode): a changed recipe has no recorded digest until its new one is recorded here, with the commit and CPU that
 * computed it. Each was computed on an AMD EPYC with AVX-512 and checked equal with HACRL_FORCE_AVX2=1 (and, for the
 * tiny pair, the TypeScript backend, 1 thread and OpenBLAS).
 */
export const RECORDED_WEIGHTS: Readonly<Record<string, { hash: string; sha256: string }>> = {
  'size/small': { hash: '782dd6ed8134', sha256: '0610a168bfbbe13d39dd6903ac9d0ad26a5c6a03d7d6275d8209b4f8e6ea59bb' },
  'size/large': { hash: '8742307ad79a', sha256: 'f8a0c1543bd9501f4435361e9141982a585b3f1937c823711c3bb683e986e7d7' },
  'tiny/small': { hash: 'b081895bc06c', sha256: '54e182d40962feb671eb16fd60c11027dacb9141c7d60d485f49692166b9c43a' },
  'tiny/large': { hash: '9a064f779d9d', sha256: 'b929d45b7c08daa7c561badca8b8d97c4c32334680334af40b1dc9d5a3ed4755' },
};
