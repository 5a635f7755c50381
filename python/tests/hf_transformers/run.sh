#!/usr/bin/env bash
# ctest's python_transformers: the transformers suite in the PyPI environment scripts/setup_pypi.sh makes (a newer
# PyTorch than Debian's, and transformers). Exit 77 (ctest: skipped), saying why, when that environment is absent.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
python=$repo/build/pypi-venv/bin/python
if [ ! -x "$python" ]; then
  echo "SKIPPED: no $repo/build/pypi-venv (make test creates it with scripts/setup_pypi.sh; it needs PyPI)"
  exit 77
fi
cd "$repo/python"
# PyTorch's OpenMP threads would spin on the cores hymoe's pool runs on (docs/transformers.md, "Speed").
export OMP_WAIT_POLICY=PASSIVE
exec "$python" -m pytest -q -rs -p no:cacheprovider tests/hf_transformers "$@"
