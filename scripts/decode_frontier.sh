#!/usr/bin/env bash
# Reproduces the decode-time placement frontier of docs/placement.md ("Decode-time placement") from the
# Qwen1.5-MoE trace in ../shared/traces: for each policy and setting, `hymoe replay --policy ... --json` at a 25%
# budget (75 of 300 experts), the hit rate and the expert moves per layer per 8 decode steps on each half of the
# 127 decode steps (1st half = steps 1-63, used for tuning; 2nd half = steps 64-127, reported only) and on all.
# usage: scripts/decode_frontier.sh [TRACES_DIR] [HYMOE]   (a few seconds)
set -euo pipefail
traces=${1:-../shared/traces}
hymoe=${2:-build/release/tools/hymoe/hymoe}
trace=$traces/qwen15_moe_a27b_vllm_5layers/routing_trace_5layers.csv
expert_bytes=17301504  # 3 x 2048 x 1408 bf16: one Qwen1.5-MoE expert

run() {  # $1: label; the rest: replay flags
  local label=$1
  shift
  "$hymoe" replay --trace "$trace" --num-experts 60 --gpu-experts-ratio 0.25 --expert-bytes "$expert_bytes" --json "$@" |
    python3 -c '
import json, sys
j = json.load(sys.stdin)
p = {x["part"]: x for x in j["parts"]}
cells = []
for name in ("decode, 1st half", "decode, 2nd half", "decode"):
    cells += ["%.1f%%" % (100 * p[name]["hit_rate"]), "%.3f" % p[name]["moves_per_layer_per_8_steps"]]
print("| " + sys.argv[1] + " | " + " | ".join(cells) + " |")' "$label"
}

echo "| policy | 1st half: hit | moves/layer/8 steps | 2nd half: hit | moves/layer/8 steps | all decode: hit | moves/layer/8 steps |"
echo "|---|---|---|---|---|---|---|"
run "static, frequency plan of the prompt" --policy static --start prompt
run "static, uniform (no knowledge)" --policy static --start uniform
for rate in 0.03125 0.0625 0.125 0.25 0.5 -1; do
  run "score-cache, decay 0.9, move rate $rate" --policy score-cache --decay 0.9 --move-rate "$rate"
done
for decay in 1 0.97 0.95 0.8; do
  run "score-cache, decay $decay, move rate 0.125" --policy score-cache --decay "$decay" --move-rate 0.125
done
run "score-cache, margin 0.5, move rate 0.125" --policy score-cache --margin 0.5 --move-rate 0.125
run "score-cache, credit cap 8, move rate 0.125" --policy score-cache --move-credit-cap 8 --move-rate 0.125
for weight in 25 100; do
  run "score-cache, start prompt, prompt weight $weight, move rate 0.125" --policy score-cache --start prompt \
    --prompt-weight "$weight" --move-rate 0.125
done
for horizon in 0.5 1 2 4 8; do
  run "cost-aware, horizon $horizon steps, no move cap" --policy cost-aware --move-rate -1 --horizon-steps "$horizon"
done
run "cost-aware, horizon 8 steps, move rate 0.125" --policy cost-aware --move-rate 0.125 --horizon-steps 8
