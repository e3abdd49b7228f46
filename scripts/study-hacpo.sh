#!/usr/bin/env bash
# HACPO against the paper's baselines, in miniature: two warm-started agents that differ in architecture and
# tokenizer (examples/hacpo-easy.yaml), 20 steps each, greedy accuracy on a held-out split before and after.
#   hacpo, naive: the two agents together (each generates B·G = 128 rollouts per step, 4 updates per step)
#   gspo:         each agent alone, same B·G, 2 updates per step (the authors' GSPO baseline)
#   gspo-x2:      each agent alone, 2G = 16 per prompt and 4 updates (as many rollouts as the pair generates)
# Prints one line per trained agent. Usage: bash scripts/study-hacpo.sh QWEN_DIR LLAMA_DIR [OUT_DIR]
# (SEEDS="1 2 3" by default; QWEN_DIR from `npm run demo`, LLAMA_DIR from the hacrl sft line in the example.)
set -euo pipefail
cd "$(dirname "$0")/.."
qwen=${1:?usage: study-hacpo.sh QWEN_DIR LLAMA_DIR [OUT_DIR]}
llama=${2:?usage: study-hacpo.sh QWEN_DIR LLAMA_DIR [OUT_DIR]}
out=${3:-runs/study-hacpo}
heldout=easy:test:300:7
hacrl() { node dist/src/cli/main.js "$@"; }
accuracy() { hacrl eval --model "$1" --data $heldout --template '{question}' --max-new-tokens 96 --json |
  tail -1 | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const g=JSON.parse(s).results[0].greedy;
  console.log(`${(100*g.value).toFixed(1)}% [${(100*g.low).toFixed(1)}, ${(100*g.high).toFixed(1)}] n=${g.n}`)})'; }
final() { echo "$1/checkpoints/step-000020/agents/$2"; }
mkdir -p "$out"
echo "base qwen $(accuracy "$qwen")"
echo "base llama $(accuracy "$llama")"
for seed in ${SEEDS:-1 2 3}; do
  for algo in hacpo naive; do
    dir=$out/$algo-$seed
    rm -rf "$dir"
    hacrl train --config examples/hacpo-easy.yaml --set "agents.0.checkpoint=$qwen" "agents.1.checkpoint=$llama" \
      "runDir=$dir" "seed=$seed" eval.every=0 checkpoint.every=0 "algorithm=$algo" > "$dir.log"
    for name in qwen llama; do echo "$algo seed $seed $name $(accuracy "$(final "$dir" $name)")"; done
  done
  for name in qwen llama; do
    ckpt=$([ $name = qwen ] && echo "$qwen" || echo "$llama")
    for preset in gspo gspo-x2; do
      dir=$out/$preset-$name-$seed
      rm -rf "$dir"
      shape=$([ $preset = gspo ] && echo "rollout.groupSize=8 optim.miniBatches=2" ||
        echo "rollout.groupSize=16 optim.miniBatches=4")
      # shellcheck disable=SC2086 # $shape is two overrides
      hacrl train --config examples/grpo-easy.yaml --set "agents.0.name=$name" "agents.0.checkpoint=$ckpt" \
        "runDir=$dir" steps=20 "seed=$seed" eval.every=0 checkpoint.every=0 algorithm=gspo "preset=$preset" \
        $shape optim.lr=1e-4 > "$dir.log"
      echo "$preset seed $seed $name $(accuracy "$(final "$dir" $name)")"
    done
  done
done
