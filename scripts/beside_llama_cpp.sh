#!/usr/bin/env bash
# Times hymoe's weight formats and llama.cpp's MoE layer (the peer harness of ../shared/peers) on one shape in one
# script, and kt-kernel's CPU operator too when KT_VENV names its virtual environment: rounds alternate the
# engines, each run waits for a quiet machine first, and the table pools every round's repeats (medians). The peers
# must be set up first (../shared/peers/llama_cpp/build.sh WORKDIR, ../shared/peers/kt_kernel/setup.sh VENV).
# usage: scripts/beside_llama_cpp.sh LLAMA_WORKDIR OUT_DIR [ROUNDS=3] [SHAPE=deepseek-v2-lite] [TOKENS=1,32,512]
#   env: PEERS (../shared/peers), HYMOE (build/release/tools/hymoe/hymoe), HYMOE_DTYPES, LLAMA_TYPES, KT_VENV,
#        KT_WEIGHTS (bf16 int8 int4)
set -euo pipefail
llama=$1
out=$2
rounds=${3:-3}
shape=${4:-deepseek-v2-lite}
tokens=${5:-1,32,512}
peers=${PEERS:-../shared/peers}
hymoe=${HYMOE:-build/release/tools/hymoe/hymoe}
hymoe_dtypes=${HYMOE_DTYPES:-f32 bf16 q8_0 gguf_q8_0 q4_0 q4_k q6_k fp8 mxfp4}
llama_types=${LLAMA_TYPES:-f32,bf16,q8_0,q4_0,q4_K}
kt_venv=${KT_VENV:-}
kt_weights=${KT_WEIGHTS:-bf16 int8 int4}

mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  bash "$peers/wait_quiet.sh" 120 5 || true
  # shellcheck disable=SC2086  # the dtype and token lists are meant to split into arguments
  "$hymoe" bench --shape "$shape" --tokens ${tokens//,/ } --dtype $hymoe_dtypes --repeats 3 --threads 2 \
    --no-baseline --json >"$out/hymoe_round$round.jsonl"
  bash "$peers/wait_quiet.sh" 120 5 || true
  bash "$peers/llama_cpp/run.sh" "$llama" "$shape" "$llama_types" "$tokens" --repeats 3 >"$out/llama_round$round.jsonl"
  if [ -n "$kt_venv" ]; then
    bash "$peers/wait_quiet.sh" 120 5 || true
    # shellcheck disable=SC2086
    "$kt_venv/bin/python" "$peers/kt_kernel/bench.py" --shape "$shape" --tokens ${tokens//,/ } --weights $kt_weights \
      --threads 2 --repeats 3 >"$out/kt_round$round.jsonl"
  fi
done
python3 "$peers/table.py" "$out"/*.jsonl
