#!/usr/bin/env bash
# Reproduces the results tables of docs/placement.md from ../shared/traces: realized hit rates on held-out data
# of every strategy at GPU budgets of 10%..90%, the static oracle, and (for the per-token trace) re-planning.
#   count tables (Mixtral MMLU subjects, OLMoE / Mixtral text domains): leave one subject or domain out, plan
#     from the sum of the others, score on the one left out; the mean over held-out parts is printed.
#   the Qwen1.5-MoE trace: plan from the first half, score on the second; the replay learns online.
#   DeepSeek-V3: only per-layer shares without expert identities exist; docs/placement.md quotes them.
# usage: scripts/placement_results.sh [TRACES_DIR] [HYMOE]   (about ten seconds)
set -euo pipefail
traces=${1:-../shared/traces}
hymoe=${2:-build/release/tools/hymoe/hymoe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$(dirname "$0")/placement_data.sh" "$traces" "$work" > /dev/null

# Mean over held-out parts of `hymoe plan --sweep` tables. $1: title, $2: file prefix.
leave_one_out() {
  local title=$1 prefix=$2 files=("$work/$2"_*.csv)
  echo "### $title (${#files[@]} parts, leave one out)"
  for held in "${files[@]}"; do
    local args=()
    for f in "${files[@]}"; do [[ $f == "$held" ]] || args+=(--stats "$f"); done
    "$hymoe" plan "${args[@]}" --num-gpu-experts 1 --evaluate "$held" --sweep \
      | awk '/^predicted step time on the evaluation data/ { t = 1 } /^ *[0-9.]+%/ { if (t) print "T " $0; else print "H " $0 }'
  done | awk '
    { budget = $2; k = $1; for (i = 3; i <= NF; ++i) { v = $i; sub("%", "", v); sum[k, budget, i] += v }
      n[k, budget]++; cols[k] = NF
      if (k == "H" && !(budget in seen)) { order[++rows] = budget; seen[budget] = 1 } }
    END {
      print "| budget | frequency | score_aware (min=B/L) | uniform | front-loading | random | critical_path | oracle |"
      print "|---|---|---|---|---|---|---|---|"
      for (r = 1; r <= rows; ++r) { b = order[r]; line = "| " b
        for (i = 3; i <= cols["H"]; ++i) line = line sprintf(" | %.1f%%", sum["H", b, i] / n["H", b]); print line " |" }
      print ""
      print "Predicted step time, default cost model, mean over held-out parts (us):"
      print ""
      print "| budget | frequency | critical_path | critical_path vs frequency |"
      print "|---|---|---|---|"
      for (r = 1; r <= rows; ++r) { b = order[r]; f = sum["T", b, 3] / n["T", b]; c = sum["T", b, 8] / n["T", b]
        printf "| %s | %.1f | %.1f | %+.1f%% |\n", b, f, c, 100 * (c - f) / f } }'
  echo
}

leave_one_out "Mixtral-8x7B-Instruct, MMLU subjects (32 x 8, top-2)" mixtral_mmlu_instruct
leave_one_out "Mixtral-8x7B base, MMLU subjects (32 x 8, top-2)" mixtral_mmlu_base
leave_one_out "OLMoE-1B-7B, text domains, layers 0/7/15 (3 x 64, top-8)" olmoe
leave_one_out "Mixtral-8x7B, text domains, layers 0/7/15 (3 x 8, top-2)" mixtral_olmoerepo

qwen="$traces/qwen15_moe_a27b_vllm_5layers/routing_trace_5layers.csv"
echo "### Qwen1.5-MoE-A2.7B, GSM8K trace, layers 0/8/12/18/23 (5 x 60, top-4): first half -> second half"
"$hymoe" replay --trace "$qwen" --num-experts 60 --gpu-experts-ratio 0.1 --replan-every 128 --hysteresis 0.3 --sweep \
  | grep -E '^ *[0-9.]+%' | awk '
    BEGIN { print "| budget | frequency | score_aware (min=B/L) | uniform | front-loading | random | critical_path | replay | oracle | replay moves |"
            print "|---|---|---|---|---|---|---|---|---|---|" }
    { line = "| " $1; for (i = 2; i <= NF; ++i) line = line " | " $i; print line " |" }'
echo
