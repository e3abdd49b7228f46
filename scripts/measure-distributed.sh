#!/usr/bin/env bash
# Wall time of one HACPO run of a zoo pair (default `model`: Qwen3-style + byte-level BPE, Llama-style + characters) as
# one process (`hacrl train`) and as two agent processes over a local nats-server (`hacrl agent`), then a check that
# both end with the same weights. Timings mean something only on a quiet machine.
# Usage: bash scripts/measure-distributed.sh [STEPS (default 10)] [PAIR (default model)] [WORK_DIR (default: temporary)]
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-10}"
pair="${2:-model}"
work="${3:-$(mktemp -d)}"
hacrl=(node dist/src/cli/main.js)

"${hacrl[@]}" zoo build --only "$pair" >/dev/null
dirs="$("${hacrl[@]}" zoo list --json | node -e '
  const z = JSON.parse(require("fs").readFileSync(0, "utf8"));
  for (const a of z.agents.filter((x) => x.pair === process.argv[1])) console.log(a.agent, a.dir);' "$pair")"
config="$work/run.yaml"
{
  echo "algorithm: hacpo"
  echo "agents:"
  while read -r name dir; do printf '  - name: %s\n    checkpoint: %s\n' "$name" "$(realpath "$dir")"; done <<<"$dirs"
  echo "data: { train: 'easy:train:4000', validation: ['easy:test:100'], template: '{question}' }"
  echo "rollout: { promptsPerStep: 16, groupSize: 8, maxNewTokens: 96 }"
  echo "optim: { lr: 1.0e-4, weightDecay: 0 }"
  echo "steps: $steps"
  echo "eval: { every: 0, problems: 100 }"
  echo "runDir: $work/run"
} >"$config"

port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
broker=$!
trap 'kill "$broker"' EXIT

seconds() { node -e 'console.log((Number(process.argv[1]) / 1e9).toFixed(1))' "$1"; }
t0=$(date +%s%N)
"${hacrl[@]}" train --config "$config" --set "runDir=$work/one" >"$work/one.log"
t1=$(date +%s%N)
pids=()
while read -r name _; do
  "${hacrl[@]}" agent --config "$config" --agent "$name" --broker "nats://127.0.0.1:$port" >"$work/$name.log" &
  pids+=($!)
done <<<"$dirs"
for p in "${pids[@]}"; do wait "$p"; done
t2=$(date +%s%N)

echo "1 process (hacrl train):      $(seconds $((t1 - t0))) s"
echo "2 processes (hacrl agent ×2): $(seconds $((t2 - t1))) s   (broker on 127.0.0.1:$port, $steps steps, work dir $work)"
last="step-$(printf '%06d' "$steps")"
while read -r name _; do
  cmp "$work/one/checkpoints/$last/agents/$name/model.safetensors" \
    "$work/run/$name/checkpoints/$last/agents/$name/model.safetensors"
  echo "$name: final weights identical"
done <<<"$dirs"
