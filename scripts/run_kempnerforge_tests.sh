#!/usr/bin/env bash
# Runs KempnerForge's own MoE unit tests with `kempnerforge.model.moe` resolving to hymoe.torch (the rest of
# KempnerForge its own code), against a KempnerForge checkout the caller provides. Fetches nothing.
#
#   scripts/run_kempnerforge_tests.sh KEMPNERFORGE_CHECKOUT [pytest arguments...]
#
# Default tests: tests/unit/test_moe.py; extra arguments replace them (e.g. tests/unit/test_router.py -k moe).
# NPROC=N runs them on N processes under torch.distributed.run, on the CPU over gloo (scripts/kempnerforge_on_cpu.py
# points the tests' CUDA devices and NCCL there): KempnerForge's distributed tests, e.g.
#   NPROC=4 scripts/run_kempnerforge_tests.sh KEMPNERFORGE_CHECKOUT tests/distributed/test_ep.py
# Environment: PYTHON (default /usr/bin/python3, the interpreter the build made the extension for);
# HYMOE_EXTENSION_DIR (default build/release/python of this clone: the built _core and _torch_core; set it
# empty, HYMOE_EXTENSION_DIR=, to test the hymoe installed in PYTHON's environment instead of this clone's).
# docs/python.md lists what passes and why the rest fails.
set -euo pipefail
if [[ $# -lt 1 || ! -d "$1/kempnerforge" ]]; then
  echo "usage: $0 KEMPNERFORGE_CHECKOUT [pytest arguments...]  (the folder holding kempnerforge/ and tests/)" >&2
  exit 2
fi
kf=$(cd "$1" && pwd)
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-/usr/bin/python3}
ext=${HYMOE_EXTENSION_DIR-$repo/build/release/python}
if [[ -n "$ext" && ! -e $(ls "$ext"/_core*.so 2>/dev/null | head -1) ]]; then
  echo "$0: no built hymoe._core in $ext (cmake --build --preset release --target _core _torch_core)" >&2
  exit 2
fi
# hymoe._torch_core links the PyTorch it was built against; loaded into another PyTorch it can abort the process
# (seen: built on Debian's 1.13, imported under a PyPI 2.15). So it is offered only to an interpreter whose torch
# is the build interpreter's; otherwise only _core is put on the path (the numpy-based path, same results).
if [[ -n "$ext" ]]; then
  build_python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$ext/../CMakeCache.txt" 2>/dev/null || true)
  build_python=${build_python:-/usr/bin/python3}
  torch_of() { "$1" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none; }
  if [[ "$(torch_of "$python")" != "$(torch_of "$build_python")" ]]; then
    only_core=$(mktemp -d)
    trap 'rm -rf "$only_core"' EXIT
    ln -s "$(cd "$ext" && pwd)"/_core*.so "$only_core"/
    echo "$0: $python's torch differs from the build's ($build_python): hymoe._torch_core left out" >&2
    ext=$only_core
  fi
fi
tests=("$@")
[[ ${#tests[@]} -gt 0 ]] || tests=(tests/unit/test_moe.py)
cd "$kf"
source_package=$repo/python:
[[ -n "$ext" ]] || source_package=  # the installed hymoe, not this clone's source
export PYTHONPATH="$kf:$source_package$repo/scripts${PYTHONPATH:+:$PYTHONPATH}"
export HYMOE_EXTENSION_DIR="$ext" PYTHONDONTWRITEBYTECODE=1
if [[ -n "${NPROC:-}" ]]; then
  [[ "$NPROC" =~ ^[1-9][0-9]*$ ]] || { echo "$0: NPROC=$NPROC is not a process count" >&2; exit 2; }
  # A hang (a rank left waiting in an exchange) is killed after HANG_SECONDS and fails the run.
  exec timeout --kill-after=10 "${HANG_SECONDS:-900}" "$python" -m torch.distributed.run --nproc_per_node "$NPROC" \
    -m pytest -p kempnerforge_alias -p kempnerforge_on_cpu -p no:cacheprovider -q -rfEs "${tests[@]}"
fi
"$python" -m pytest -p kempnerforge_alias -p no:cacheprovider -q -rfEs "${tests[@]}"
