#!/usr/bin/env bash
# Peak memory of `hymoe stats` per input byte (count files) and per routing entry (traces), on files generated in a
# temporary directory that is removed at the end. docs/robustness.md quotes its output.
# usage: scripts/placement_memory.sh [HYMOE_BINARY]   (default build/release/tools/hymoe/hymoe; needs GNU time)
# Sizes: HYMOE_MEM_JSON_CELLS (default 8388608), HYMOE_MEM_ST_MIB (default 512), HYMOE_MEM_TRACE_TOKENS (20000).
set -euo pipefail
hymoe=${1:-build/release/tools/hymoe/hymoe}
json_cells=${HYMOE_MEM_JSON_CELLS:-8388608}
st_mib=${HYMOE_MEM_ST_MIB:-512}
trace_tokens=${HYMOE_MEM_TRACE_TOKENS:-20000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/hymoe_mem_XXXXXX")
trap 'rm -rf "$dir"' EXIT

# Peak RSS in KiB of one run (the exit status is ignored: a refused file is measured too).
peak_kib() { /usr/bin/time -v "$@" >/dev/null 2>"$dir/time.txt" || true; awk -F': ' '/Maximum resident/ {print $2}' "$dir/time.txt"; }

python3 - "$dir" "$json_cells" "$st_mib" "$trace_tokens" <<'EOF'
import json, struct, sys
d, cells, st_mib, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
experts = 4096
layers = max(1, cells // experts)
with open(f"{d}/tiny.json", "w") as f:
    f.write("[[1, 2], [3, 4]]")
# Realistic counts: 5-digit values.
row = "[" + ", ".join(str(10000 + (e * 7919) % 89999) for e in range(experts)) + "]"
with open(f"{d}/counts.json", "w") as f:
    f.write('{"activation_freq": [' + ", ".join([row] * layers) + "]}")
with open(f"{d}/counts.csv", "w") as f:
    f.write("layer,expert,count\n")
    for l in range(layers):
        f.write("".join(f"{l},{e},{10000 + (e * 7919) % 89999}\n" for e in range(experts)))
# The worst case per byte: 40 M single-digit values (80 MB), beyond the cell limit.
with open(f"{d}/zeros.json", "w") as f:
    f.write("[[" + "0," * (40 * 1024 * 1024 - 1) + "0]]")
# SGLang's recorder dump: logical_count (steps, 64, 1024) float32, st_mib MiB.
L, E = 64, 1024
steps = st_mib * 1024 * 1024 // (4 * L * E)
header = json.dumps({"logical_count": {"dtype": "F32", "shape": [steps, L, E], "data_offsets": [0, steps * L * E * 4]}}).encode()
header += b" " * (-len(header) % 8)
with open(f"{d}/logical_count.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header)
    block = struct.pack("<f", 1.0) * (L * E)
    for _ in range(steps):
        f.write(block)
# A trace: 24 layers, top-8 with scores (the vLLM logger's columns).
with open(f"{d}/trace.csv", "w") as f:
    f.write("row,forward_pass,row_in_forward_pass,layer,e1,e2,e3,e4,e5,e6,e7,e8,w1,w2,w3,w4,w5,w6,w7,w8\n")
    for t in range(tokens):
        for l in range(24):
            ids = ",".join(str((t * 13 + l * 7 + k * 11) % 64) for k in range(8))
            f.write(f"{t},{t // 16},{t % 16},{l},{ids},0.25,0.2,0.15,0.1,0.1,0.08,0.07,0.05\n")
    f.write("")
print(f"trace entries: {tokens * 24 * 8}", file=open(f"{d}/entries.txt", "w"))
EOF

base=$(peak_kib "$hymoe" stats "$dir/tiny.json")
printf '%-28s %12s %12s %12s %s\n' file bytes peak_KiB above_base ratio
printf '%-28s %12s %12s %12s\n' "(baseline: tiny.json)" "$(stat -c %s "$dir/tiny.json")" "$base" 0
for f in counts.json counts.csv zeros.json logical_count.safetensors; do
  bytes=$(stat -c %s "$dir/$f")
  kib=$(peak_kib "$hymoe" stats "$dir/$f")
  awk -v f="$f" -v b="$bytes" -v k="$kib" -v base="$base" \
    'BEGIN { printf "%-28s %12d %12d %12d %.2fx the file\n", f, b, k, k - base, (k - base) * 1024 / b }'
done
entries=$(awk '{print $3}' "$dir/entries.txt")
bytes=$(stat -c %s "$dir/trace.csv")
kib=$(peak_kib "$hymoe" stats "$dir/trace.csv")
awk -v b="$bytes" -v k="$kib" -v base="$base" -v n="$entries" \
  'BEGIN { printf "%-28s %12d %12d %12d %.1f bytes per entry (%d entries)\n", "trace.csv", b, k, k - base, (k - base) * 1024 / n, n }'
