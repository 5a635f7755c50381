#!/usr/bin/env bash
# The PyPI environment of the transformers suite: a virtual environment of Debian's python3 (the interpreter
# hymoe._core is built for) at build/pypi-venv, holding the packages of python/tests/hf_transformers/requirements.txt
# with every dependency at the version constraints.txt pins. transformers 5.x needs a PyTorch newer than Debian's,
# and PyPI's wheel is the only one reachable here. Idempotent: a venv whose stamp matches the pins is left as it is. Without a
# package index it says so and exits 0; the suite's ctest entry then reports itself skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=python/tests/hf_transformers/requirements.txt
constraints=python/tests/hf_transformers/constraints.txt
venv=build/pypi-venv
stamp=$venv/hymoe-requirements.txt
if [ -f "$stamp" ] && cmp -s "$stamp" <(cat "$requirements" "$constraints"); then
  exit 0
fi
rm -rf "$venv"
mkdir -p build
/usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --timeout 60 --retries 2)
if ! "${pip[@]}" download --no-deps --dest "$venv/probe" six==1.16.0 >/dev/null 2>&1; then
  echo "setup_pypi: no package index reachable; the transformers suite will be skipped"
  rm -rf "$venv"
  exit 0
fi
rm -rf "$venv/probe"
echo "setup_pypi: installing $(grep -v '^#' "$requirements" | tr '\n' ' ')into $venv"
start=$(date +%s)
"${pip[@]}" install --quiet --no-cache-dir -r "$requirements" -c "$constraints"
cat "$requirements" "$constraints" > "$stamp"
echo "setup_pypi: done in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
