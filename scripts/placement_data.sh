#!/usr/bin/env bash
# Converts the permissively licensed routing statistics in ../shared/traces into hymoe count CSVs
# (`layer,expert,count`), one file per subject or domain: the test data in tests/data/placement/ and the inputs
# of scripts/placement_results.sh. Only Apache-2.0 sources are converted (see each folder's PROVENANCE.md).
# usage: scripts/placement_data.sh TRACES_DIR OUT_DIR
set -euo pipefail
traces=${1:?traces dir}; out=${2:?out dir}
mkdir -p "$out"
# Fiddler (efeslab/fiddler, Apache-2.0): Mixtral-8x7B base/instruct on 7 MMLU subjects, 32 x 8.
awk -F, -v out="$out" 'NR > 1 {
  model = ($1 ~ /instruct/) ? "instruct" : "base"
  f = out "/mixtral_mmlu_" model "_" $2 ".csv"
  if (!(f in seen)) { print "layer,expert,count" > f; seen[f] = 1 }
  print $3 "," $4 "," $5 > f
}' "$traces/fiddler_mixtral_mmlu_popularity/expert_counts_long.csv"
# OLMoE repo (allenai/OLMoE, Apache-2.0): OLMoE-1B-7B layers 0/7/15 x 64 and Mixtral layers 0/7/15 x 8, per domain.
# Trace layer i is model layer 0, 7, 15.
awk -F, -v out="$out" 'NR > 1 {
  if ($1 == "allenai/OLMoE-1B-7B-0924") m = "olmoe"; else if ($1 ~ /Mixtral/) m = "mixtral_olmoerepo"; else next
  layer = ($3 == 0) ? 0 : ($3 == 7) ? 1 : ($3 == 15) ? 2 : -1
  if (layer < 0) next
  f = out "/" m "_" $2 ".csv"
  if (!(f in seen)) { print "layer,expert,count" > f; seen[f] = 1 }
  print layer "," $4 "," $5 > f
}' "$traces/olmoe_repo_expert_counts/expert_counts_long.csv"
ls "$out"
