#!/usr/bin/env bash
# Single-agent baselines from one warm-started agent: GRPO (DAPO clip) and GSPO, 3 seeds each, 20 steps of
# examples/grpo-easy.yaml; greedy accuracy on a held-out split before and after. Prints one line per run.
# Usage: bash scripts/study-single.sh AGENT_DIR [OUT_DIR]   (AGENT_DIR from `hacrl sft`, e.g. runs/demo-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: study-single.sh AGENT_DIR [OUT_DIR]}
out=${2:-runs/study-single}
heldout=easy:test:300:7
hacrl() { node dist/src/cli/main.js "$@"; }
accuracy() { hacrl eval --model "$1" --data $heldout --template '{question}' --max-new-tokens 96 --json |
  tail -1 | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const g=JSON.parse(s).results[0].greedy;
  console.log(`${(100*g.value).toFixed(1)}% [${(100*g.low).toFixed(1)}, ${(100*g.high).toFixed(1)}] n=${g.n}`)})'; }
mkdir -p "$out"
echo "base $(accuracy "$base")"
for algo in grpo gspo; do
  for seed in 1 2 3; do
    dir=$out/$algo-$seed
    rm -rf "$dir"
    hacrl train --config examples/grpo-easy.yaml --set "agents.0.checkpoint=$base" "runDir=$dir" steps=20 \
      "seed=$seed" eval.every=0 checkpoint.every=0 "algorithm=$algo" optim.lr=1e-4 > "$dir.log"
    echo "$algo seed $seed $(accuracy "$dir/checkpoints/step-000020/agents/demo")"
  done
done
