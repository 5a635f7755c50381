#!/usr/bin/env bash
# `pip install .` as a user runs it: a fresh virtual environment of the first python3 on PATH, pip fetching the build
# backend (scikit-build-core, pybind11) and numpy from the package index, then the installed package imported from
# outside the clone and used. The library is the one the release build made ($1), so this builds only the
# extension's own four translation units. Exit 77 (ctest: skipped) with the reason when it cannot run here.
set -euo pipefail
library=$(realpath "$1")
repo=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python=$(command -v python3) || { echo "SKIPPED: no python3 on PATH"; exit 77; }
"$python" -m venv "$work/venv" >/dev/null 2>&1 || { echo "SKIPPED: $python cannot create a venv"; exit 77; }
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check --timeout 20 --retries 1)
if ! "${pip[@]}" download --no-deps --dest "$work/probe" scikit-build-core >/dev/null 2>&1; then
  echo "SKIPPED: no package index reachable from $python (pip cannot fetch scikit-build-core)"
  exit 77
fi

start=$(date +%s)
"${pip[@]}" install --quiet "$repo" \
  --config-settings=build-dir="$work/build" \
  --config-settings=cmake.define.HYMOE_PYTHON_PREBUILT_LIBRARY="$library"
echo "pip install . took $(( $(date +%s) - start )) s"

cd "$work"
"$work/venv/bin/python" - <<'PY'
import numpy as np
import hymoe, hymoe.placement as kt
assert "site-packages" in hymoe.__file__, hymoe.__file__
freq = np.array([[0.1, 0.5, 0.3, 0.8], [0.2, 0.4, 0.9, 0.1]], dtype=np.float32)
mask = kt.generate_gpu_experts_masks(freq, 3)
assert mask.tolist() == [[False, True, False, True], [False, False, True, False]], mask
print("installed hymoe", hymoe.__version__, "from", hymoe.__file__, "plans:", mask.astype(int).tolist())
PY
