#!/usr/bin/env bash
# `pip install --no-build-isolation .` as a PyTorch user runs it: into the PyPI environment of scripts/setup_pypi.sh
# (a current PyTorch from PyPI), where the build sees torch, so it builds hymoe._torch_core against that PyTorch
# beside hymoe._core. The installed package must then take the fast path (hymoe.torch.FAST_FORWARD), stamp the
# PyTorch it was built against, and pass the hymoe.torch suite (the KempnerForge drop-in's tests) on that PyTorch.
# The library is the release build's ($1). Installed with --target into a temporary folder, so the shared
# environment is left as it was. Exit 77 (ctest: skipped) with the reason when that environment is absent.
set -euo pipefail
library=$(realpath "$1")
repo=$(pwd)
python=$repo/build/pypi-venv/bin/python
if [ ! -x "$python" ]; then
  echo "SKIPPED: no $repo/build/pypi-venv (make test creates it with scripts/setup_pypi.sh; it needs PyPI)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
"$python" -m pip install --disable-pip-version-check --quiet --no-build-isolation --no-deps --target "$work/site" \
  "$repo" --config-settings=build-dir="$work/build" \
  --config-settings=cmake.define.HYMOE_PYTHON_PREBUILT_LIBRARY="$library"
echo "pip install --no-build-isolation . took $(( $(date +%s) - start )) s"

cd "$work"
PYTHONPATH="$work/site" "$python" - <<'PY'
import torch
import hymoe, hymoe.torch as ht
from hymoe._torch_core_build import TORCH_VERSION
assert hymoe.__file__.startswith(__import__("os").getcwd()), hymoe.__file__
assert ht.FAST_FORWARD, "the installed hymoe.torch does not take hymoe._torch_core's path"
assert TORCH_VERSION == torch.__version__, (TORCH_VERSION, torch.__version__)
print("installed hymoe with _torch_core for torch", TORCH_VERSION)
PY
PYTHONPATH="$work/site" PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -rs -p no:cacheprovider "$repo/python/tests/torch"
