/**
 * The sha256 of each zoo agent's model.safetensors as the reproducible mode builds it, which every machine must
 * reproduce (`hacrl zoo build --check` compares). `hash` is the start of the recipe's folder hash (agentHash in the
 * mode): a changed recipe has no recorded digest until its new one is recorded here and in docs/reproducible.md, with
 * the commit and CPU that computed it. Each was computed on an AMD EPYC with AVX-512 and checked equal with HACRL_FORCE_AVX2=1 (and, for the
 * tiny pair, the TypeScript backend, 1 thread and OpenBLAS).
 */
export const RECORDED_WEIGHTS: Readonly<Record<string, { hash: string; sha256: string }>> = {
  'state/early': { hash: '91faee86089a', sha256: '7f26f9cfcb03584c7f9af7083d184161f1a63865db59ce2fec67c1ee8f582142' },
  'state/late': { hash: '1472ec5bba7a', sha256: 'd3cd597857a2d603c01bd5600f2e0cc0b24500527925bf3fb89e711b14316737' },
  'model/qwen': { hash: 'd2de042b1395', sha256: '7940645e9f1e4627371f749956393180c1b33d5e85304f706fa6681ab0a836d7' },
  'model/llama': { hash: '43059ebe5a87', sha256: 'f147368475865ae6d423ad39e896d04cfa7dfc0f3f209de9fb44eeb5f2eaf364' },
  'size/small': { hash: '782dd6ed8134', sha256: '0610a168bfbbe13d39dd6903ac9d0ad26a5c6a03d7d6275d8209b4f8e6ea59bb' },
  'size/large': { hash: '8742307ad79a', sha256: 'f8a0c1543bd9501f4435361e9141982a585b3f1937c823711c3bb683e986e7d7' },
  'tiny/small': { hash: 'b081895bc06c', sha256: '54e182d40962feb671eb16fd60c11027dacb9141c7d60d485f49692166b9c43a' },
  'tiny/large': { hash: '9a064f779d9d', sha256: 'b929d45b7c08daa7c561badca8b8d97c4c32334680334af40b1dc9d5a3ed4755' },
};
