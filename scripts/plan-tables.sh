#!/usr/bin/env bash
# The plan figures of docs/real-models.md ("The memory plan"), from `hacrl plan` itself: one GRPO agent of each public
# shape (config.json written from src/model/shapes.ts, no weights) at 8 prompts × 4 samples × 256 new tokens after
# 200-token prompts, fp32, full fine-tuning or LoRA r16, with and without activation checkpointing.
# Usage: bash scripts/plan-tables.sh (after npm run build)
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo '| shape        | parameters | full fine-tuning | + checkpointing | LoRA r16 | LoRA r16 + checkpointing |'
echo '| ------------ | ---------- | ---------------- | --------------- | -------- | ------------------------ |'
for shape in smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b; do
  node --input-type=module -e '
    import { writeHfConfig } from "./dist/src/model/hf-config.js";
    import { shapeConfig, configParameterCount } from "./dist/src/model/shapes.js";
    import { mkdirSync } from "node:fs";
    const [dir, shape] = process.argv.slice(1);
    mkdirSync(dir, { recursive: true });
    await writeHfConfig(dir, shapeConfig(shape));
    console.log((configParameterCount(shapeConfig(shape)) / 1e6).toFixed(1));' "$work/$shape" "$shape" >"$work/$shape.params"
  row=()
  for lora in '' ', lora: { rank: 16, alpha: 32, targets: [all-linear] }'; do
    for ckpt in false true; do
      printf '%s\n' 'algorithm: grpo' "agents: [{ name: a, checkpoint: $work/$shape$lora }]" \
        "data: { train: 'easy:train:20', template: '{question}' }" \
        'rollout: { promptsPerStep: 8, groupSize: 4, maxNewTokens: 256 }' \
        "optim: { activationCheckpointing: $ckpt }" >"$work/one.yaml"
      row+=("$(node dist/src/cli/main.js plan --config "$work/one.yaml" --prompt-tokens 200 |
        sed -n 's/.*estimated peak \([0-9.]* GiB\).*/\1/p')")
    done
  done
  printf '| %-12s | %-10s | %-16s | %-15s | %-8s | %-24s |\n' "$shape" "$(cat "$work/$shape.params") M" "${row[@]}"
done
